"""Recorders for the maintenance workflows' histories: Backup, Restore, ChaosDrill and Migration.

Used by tests/replay/record.py (see its docstring for when to re-record). Each drives the workflow
the way its CLI command starts it, on the recorder's own dev stack, and saves the closed history.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from drctl.cli.monitor import start_monitor
from drctl.client.monitor_view import live_status
from drctl.client.operations import search_attributes, start_operation
from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.models.backup import BackupJob, BackupJobResult, BackupRequest, RestoreJob, RestoreRequest
from drctl.models.drill import DrillReport, Verdict
from drctl.models.health import RegionState
from drctl.models.migration import MigrationResult, migration_request
from drctl.models.upgrade import Outcome
from tests.support.drills import EXPERIMENTS, start_drill
from tests.support.upgrade import start_migration
from workflows.backup import Backup, Restore

Save = Callable[[WorkflowHandle[Any, Any], str], Awaitable[Path]]


async def record_backup_restore(client: Client, cfg: FleetConfig, save: Save, suffix: str) -> None:
    """A backup of us-east-1's workload, restored into us-west-1 under a new namespace (as the CLI does)."""
    east = cfg.region("us-east-1")
    name = f"replay-{uuid.uuid4().hex[:6]}"
    req = BackupRequest(
        region=east.name,
        name=name,
        namespaces=[east.kube.namespace],
        label_selector={"app": cfg.workload.app},
    )
    wid = f"backup/{cfg.name}/{name}"
    bh = await client.start_workflow(
        Backup.run,
        BackupJob(fleet=cfg.name, queue=east.queue, request=req),
        id=wid,
        task_queue=cfg.temporal.task_queue,
        search_attributes=search_attributes(cfg.name, "backup", target=east.name),
    )
    res = await asyncio.wait_for(result_of(bh, BackupJobResult), 120)
    assert res.ok, res.reason
    await save(bh, f"backup{suffix}")
    west = cfg.region("us-west-1")
    rreq = RestoreRequest(
        region=west.name,
        name=f"restore-{name}",
        backup_name=name,
        namespace_mapping={east.kube.namespace: "replay-restored"},
    )
    rh = await start_operation(
        client,
        cfg,
        Restore.run,
        RestoreJob(fleet=cfg.name, queue=west.queue, request=rreq),
        operation="restore",
        workflow_id=f"restore/{cfg.name}/{rreq.name}",
        target=west.name,
    )
    res = await asyncio.wait_for(result_of(rh, BackupJobResult), 120)
    assert res.ok, res.reason
    await save(rh, f"restore{suffix}")


async def record_drill(client: Client, cfg: FleetConfig, save: Save, suffix: str) -> None:
    """A passing region-outage drill: the real monitor fails over and back while the drill observes."""
    monitor, _ = await start_monitor(client, cfg)
    try:
        for _ in range(120):  # bounded: 60 s for two healthy rounds
            st = await live_status(monitor)  # with the watcher, its heartbeat carries the rounds
            if st.probe_rounds >= 2 and all(r.state is RegionState.HEALTHY for r in st.regions.values()):
                break
            await asyncio.sleep(0.5)
        else:
            raise RuntimeError("monitor did not see every region healthy within 60 s")
        dh = await start_drill(client, cfg, EXPERIMENTS / "region-outage.json")
        report = await asyncio.wait_for(result_of(dh, DrillReport), 240)
        assert report.verdict is Verdict.PASS, report.reasons
        await save(dh, f"drill_region_outage{suffix}")
    finally:
        await monitor.terminate("replay recording done")


async def record_migration(client: Client, cfg: FleetConfig, save: Save, suffix: str) -> None:
    """us-west-1 → us-east-1 in two steps; last, since it leaves every weight on us-east-1."""
    req = migration_request(cfg, uuid.uuid4().hex[:8], "us-west-1", "us-east-1", steps_percent=[50, 100])
    # Short windows, as in tests/upgrade: a few samples per window still judge a healthy target.
    req = req.model_copy(
        update={"step_pause_s": 1.0, "limits": req.limits.model_copy(update={"min_samples": 8})}
    )
    mh = await start_migration(client, cfg, req)
    res = await asyncio.wait_for(result_of(mh, MigrationResult), 240)
    assert res.outcome is Outcome.SUCCEEDED, res
    await save(mh, f"migration{suffix}")
