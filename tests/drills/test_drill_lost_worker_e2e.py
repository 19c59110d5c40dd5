"""A worker killed mid-drill leaves no fault behind, on the dev stack.

The worker runs as a real `drctl worker` process; "killed" is SIGKILL of it and of the `chaos run`
it started (a pod's death takes both), after the outage is injected and held. Then either the
drill workflow is still there, sees its experiment activity time out and clears the target region
itself; or the workflow is gone too, and the sweep at the next worker's start clears the fault
whose owner marker names a drill that no longer runs.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle

from drctl.config.schema import FleetConfig
from drctl.models.drill import DrillReport, Verdict
from tests.support.cli import DRCTL
from tests.support.config import write_config
from tests.support.drills import NO_FAULTS, fault_held, held_outage, result_of, start_drill
from tests.support.wait import assert_eventually
from tests.support.workers import StartWorkers, admin, fast_config

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


def _chaos_children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat, cmdline = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
            except OSError:  # gone meanwhile
                continue
            # Field 4 (after the parenthesised command, which may hold spaces) is the parent pid.
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and b"chaostoolkit" in cmdline:
                out.append(int(entry.name))
    return out


async def _kill_worker_and_chaos(worker: asyncio.subprocess.Process) -> None:
    chaos = await asyncio.to_thread(_chaos_children, worker.pid)
    assert chaos, "no chaos run under the worker"
    for pid in [worker.pid, *chaos]:
        os.kill(pid, signal.SIGKILL)
    await asyncio.wait_for(worker.wait(), 10)


Killed = tuple[FleetConfig, WorkflowHandle[object, object]]


@pytest.fixture
async def killed_mid_drill(
    start_workers: StartWorkers,  # after its fleet reset, which would clear the fault
    temporal_client: Client,
    fleet_config_path: Path,
    fleet_config: FleetConfig,
    tmp_path: Path,
) -> Killed:
    """A drill whose worker (and its `chaos run`) was killed with the outage injected and held."""
    cfg = fast_config(fleet_config)
    worker = await asyncio.create_subprocess_exec(
        str(DRCTL),
        "worker",
        "-c",
        str(write_config(cfg, fleet_config_path.parent)),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        handle = await start_drill(temporal_client, cfg, held_outage(tmp_path))
        await assert_eventually(lambda: fault_held(cfg), timeout_s=90, what="the outage injected and held")
    finally:
        if worker.returncode is None:
            await _kill_worker_and_chaos(worker)
    assert (await asyncio.to_thread(admin, cfg, "us-west-1", "/faults"))["owners"] == [handle.id]
    return cfg, handle


async def test_the_drill_workflow_clears_its_fault_when_its_worker_dies(
    start_workers: StartWorkers, killed_mid_drill: Killed
) -> None:
    cfg, handle = killed_mid_drill
    # The new worker's sweep leaves the fault alone: its drill still runs, and clears it itself.
    await start_workers(cfg=cfg)
    report = await asyncio.wait_for(result_of(handle, DrillReport), 150)
    assert report.verdict is not Verdict.PASS
    assert any("drill faults in us-west-1 cleared by the workflow" in r for r in report.reasons), (
        report.reasons
    )
    assert admin(cfg, "us-west-1", "/faults") == NO_FAULTS


async def test_a_starting_worker_sweeps_faults_whose_drill_is_gone(
    start_workers: StartWorkers, killed_mid_drill: Killed
) -> None:
    cfg, handle = killed_mid_drill
    await handle.terminate("test: the drill is gone with its worker")
    assert (await asyncio.to_thread(admin, cfg, "us-west-1", "/faults"))["replicas"], "fault still held"
    await start_workers(cfg=cfg)
    await assert_eventually(
        lambda: asyncio.to_thread(lambda: admin(cfg, "us-west-1", "/faults") == NO_FAULTS),
        timeout_s=30,
        what="the sweep cleared the orphaned fault",
    )
