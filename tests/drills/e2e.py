"""Helpers for the drill tests on the dev stack: the CLI as a user runs it, a watching monitor,
and drills started the way `drctl drill run` starts them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import yaml
from temporalio.client import Client, WorkflowHandle

from drctl.chaos.validate import validate_experiment
from drctl.config import FleetConfig
from drctl.models.drill import DrillInput, DrillReport
from drctl.models.failover import MonitorStatus
from drctl.models.health import RegionState
from drctl.operations import start_operation
from drctl.outcome import result_of
from tests.helpers import assert_eventually
from tests.workflows.conftest import admin

REPO = Path(__file__).resolve().parents[2]
DRCTL = str(REPO / ".venv" / "bin" / "drctl")
EXPERIMENTS = REPO / "experiments"


def write_cfg(cfg: FleetConfig, directory: Path) -> Path:
    """The workers' config as a file, so the CLI talks to the same queues and fleet."""
    path = directory / f"drill-{cfg.temporal.task_queue}.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return path


async def drctl(*args: str) -> tuple[int, str, str]:
    """The CLI as a user runs it; async so the in-process workers keep serving meanwhile."""
    proc = await asyncio.create_subprocess_exec(DRCTL, *args, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    return proc.returncode or 0, out.decode(), err.decode()


async def watched(client: Client, cfg: FleetConfig) -> None:
    from drctl.cli.monitor import start_monitor

    handle, _ = await start_monitor(client, cfg)

    async def healthy() -> bool:
        st = await handle.query("status", result_type=MonitorStatus)
        return st.iteration >= 2 and all(r.state is RegionState.HEALTHY for r in st.regions.values())

    await assert_eventually(healthy, timeout_s=30, what="monitor sees both regions healthy")


async def start_drill(client: Client, cfg: FleetConfig, experiment: Path, target: str = "us-west-1"
                      ) -> WorkflowHandle[object, object]:
    plan = validate_experiment(experiment, cfg, target)
    wid = f"drill/{cfg.name}/{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}"
    return await start_operation(client, cfg, "ChaosDrill", DrillInput.from_config(cfg, plan), operation="drill",
                                 workflow_id=wid, target=target)


async def run_drill(client: Client, cfg: FleetConfig, experiment: Path, target: str = "us-west-1") -> DrillReport:
    handle = await start_drill(client, cfg, experiment, target)
    return await asyncio.wait_for(result_of(handle, DrillReport), 180)


def replica_states(cfg: FleetConfig, region: str) -> list[str]:
    return [r["state"] for r in admin(cfg, region, "/replicas")]
