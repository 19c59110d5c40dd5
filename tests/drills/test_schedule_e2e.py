"""`drctl drill schedule resume` and `trigger` against the session Temporal dev server, with real
workers running the triggered drill."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from drctl.client.outcome import result_of
from drctl.models.drill import DrillReport, Verdict
from tests.support.cli import drctl_async
from tests.support.config import write_config
from tests.support.drills import EXPERIMENTS
from tests.support.wait import assert_eventually
from tests.support.workers import StartWorkers

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


async def _row(name: str, cfg_path: str) -> dict[str, Any]:
    code, out, err = await drctl_async("drill", "schedule", "list", "-c", cfg_path, "--output", "json")
    assert code == 0, err
    return next(r for r in json.loads(out) if r["id"].endswith(f"/{name}"))


async def test_resume_and_trigger_run_a_scheduled_drill(
    start_workers: StartWorkers, temporal_client: Client, fleet_config_path: Path
) -> None:
    cfg = await start_workers()
    cfg_path = str(write_config(cfg, fleet_config_path.parent))
    name = f"trig-{datetime.now(UTC).strftime('%H%M%S%f')}"
    sid = f"drill-schedule/{cfg.name}/{name}"
    code, _, err = await drctl_async(
        "drill",
        "schedule",
        "--cron",
        "0 3 * * MON",
        "--name",
        name,
        "-e",
        str(EXPERIMENTS / "region-outage.json"),
        "-c",
        cfg_path,
        "--yes",  # creating a schedule asks first; a test has no terminal to answer it
    )
    assert code == 0, err
    try:
        assert (await drctl_async("drill", "schedule", "pause", "--name", name, "-c", cfg_path))[0] == 0
        assert (await _row(name, cfg_path))["paused"] is True
        code, out, err = await drctl_async("drill", "schedule", "resume", "--name", name, "-c", cfg_path)
        assert code == 0 and f"schedule {sid}: resumed" in out, err
        row = await _row(name, cfg_path)
        assert row["paused"] is False and len(row["next_runs"]) >= 3

        code, out, err = await drctl_async(
            "drill", "schedule", "trigger", "--name", name, "--yes", "-c", cfg_path
        )
        assert code == 0 and f"schedule {sid}: triggered" in out, err
        # The run the schedule started, found the way the UI finds it.
        query = f"TemporalScheduledById = '{sid}'"

        async def started() -> list[Any]:
            return [ex async for ex in temporal_client.list_workflows(query)]

        runs = await assert_eventually(started, timeout_s=30, what=f"a workflow started by {sid}")
        assert len(runs) == 1 and runs[0].workflow_type == "ChaosDrill"
        assert runs[0].id.startswith(f"drill/{cfg.name}/{name}")
        handle = temporal_client.get_workflow_handle(runs[0].id, run_id=runs[0].run_id)
        report = await asyncio.wait_for(result_of(handle, DrillReport), 90)
        # No monitor watches this fleet, so the drill must refuse before injecting anything.
        assert report.verdict is Verdict.ABORTED, report
        assert any("is not running: nothing would detect the fault" in r for r in report.reasons), (
            report.reasons
        )
        assert not report.fault_injected and report.experiment == "region-outage"
    finally:
        assert (await drctl_async("drill", "schedule", "delete", "--name", name, "--yes", "-c", cfg_path))[
            0
        ] == 0

    code, _, err = await drctl_async("drill", "schedule", "trigger", "--name", name, "--yes", "-c", cfg_path)
    assert code == 2 and f"no drill schedule {sid}" in err and "Traceback" not in err, err
