"""Helpers for the drill tests on the dev stack: the CLI as a user runs it, a watching monitor,
and drills started the way `drctl drill run` starts them."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from drctl.chaos.validate import validate_experiment
from drctl.client.monitor_view import live_status
from drctl.client.operations import start_operation
from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.models.drill import DrillInput, DrillReport
from drctl.models.health import RegionState
from tests.support.wait import assert_eventually
from tests.support.workers import StartWorkers, admin

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"


# A drill that expects a failover keeps its load up for objectives.slo.window_s + 2 s (2 s in the
# test fleet) after `chaos run` ends, and judges that load: traffic the monitor's own failback
# returned to the target inside that tail would count as "not served elsewhere". The monitor's
# failback window must outlast the tail (with room for a slow `chaos run` exit on a loaded machine).
DRILL_FAILBACK_WINDOW_S = 12.0


async def watched_fleet(start_workers: StartWorkers, client: Client) -> FleetConfig:
    """Workers for the test fleet, watched by a monitor that sees every region HEALTHY and fails
    back only after the drill's load has ended."""
    cfg = await start_workers(failback_window_s=DRILL_FAILBACK_WINDOW_S)
    await watched(client, cfg)
    return cfg


async def watched(client: Client, cfg: FleetConfig) -> None:
    from drctl.cli.monitor import start_monitor

    handle, _ = await start_monitor(client, cfg)

    async def healthy() -> bool:
        st = await live_status(handle)  # with the watcher, its heartbeat carries the rounds
        return st.probe_rounds >= 2 and all(r.state is RegionState.HEALTHY for r in st.regions.values())

    await assert_eventually(healthy, timeout_s=30, what="monitor sees both regions healthy")


async def start_drill(
    client: Client, cfg: FleetConfig, experiment: Path, target: str = "us-west-1"
) -> WorkflowHandle[object, object]:
    plan = validate_experiment(experiment, cfg, target)
    wid = f"drill/{cfg.name}/{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}"
    search = {"operation": "drill", "workflow_id": wid, "target": target}
    return await start_operation(client, cfg, "ChaosDrill", DrillInput.from_config(cfg, plan), **search)


async def run_drill(
    client: Client, cfg: FleetConfig, experiment: Path, target: str = "us-west-1"
) -> DrillReport:
    handle = await start_drill(client, cfg, experiment, target)
    return await asyncio.wait_for(result_of(handle, DrillReport), 180)


def replica_states(cfg: FleetConfig, region: str) -> list[str]:
    return [r["state"] for r in admin(cfg, region, "/replicas")]


# What the region admin API's GET /faults answers when no fault is held.
NO_FAULTS: dict[str, Any] = {
    "replicas": [],
    "gateway": None,
    "inference": {},
    "partitioned": [],
    "control_plane": [],
    "owners": [],
}


def held_outage(tmp_path: Path) -> Path:
    """The region outage with its wait for traffic to move, but no failover expected: the fault
    stays in place (no monitor moves traffic) until the drill is stopped."""
    exp = json.loads((EXPERIMENTS / "region-outage.json").read_text())
    for ext in exp["extensions"]:
        if ext["name"] == "drctl":
            ext["expect_failover"] = False
    path = tmp_path / "held-outage.json"
    path.write_text(json.dumps(exp))
    return path


async def fault_held(cfg: FleetConfig) -> bool:
    faults: dict[str, Any] = await asyncio.to_thread(admin, cfg, "us-west-1", "/faults")
    return len(faults["replicas"]) == cfg.region("us-west-1").replicas
