"""Drills end to end on the dev stack: real monitor, failover, failback, chaos subprocess and S3."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, ScheduleActionStartWorkflow

from drctl.client.identity import os_identity
from drctl.config.schema import FleetConfig
from drctl.models import search_attributes as sa
from drctl.models.drill import DrillReport, Verdict
from tests.support.cli import drctl_async
from tests.support.config import write_config
from tests.support.drills import EXPERIMENTS, replica_states, run_drill, watched, watched_fleet
from tests.support.workers import StartWorkers, admin, fast_config, weights

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


async def test_drill_on_an_unhealthy_fleet_is_aborted_without_injecting(
    start_workers: StartWorkers, temporal_client: Client, tmp_path: Path
) -> None:
    cfg = await start_workers()
    admin(cfg, "us-east-1", "/faults/inference", {"error_rate": 1.0})
    before = replica_states(cfg, "us-west-1")
    # Through the CLI, as an operator runs it: a drill that is not PASS exits non-zero.
    code, out, err = await drctl_async(
        "drill",
        "run",
        str(EXPERIMENTS / "region-outage.json"),
        "--yes",
        "-o",
        "json",
        "-c",
        str(write_config(cfg, tmp_path)),
    )
    assert code == 1, (out, err)
    report = DrillReport.model_validate(json.loads(out))
    assert report.verdict is Verdict.ABORTED, report
    assert any("us-east-1 is" in r for r in report.reasons), report.reasons
    assert not report.fault_injected and report.journal is None
    assert replica_states(cfg, "us-west-1") == before == ["running"] * len(before)
    assert weights(cfg) == cfg.weights


async def test_drill_whose_fault_action_fails_is_failed(
    start_workers: StartWorkers, temporal_client: Client, tmp_path: Path
) -> None:
    cfg = await watched_fleet(start_workers, temporal_client)
    # A fault aimed at a track with no replicas: the platform hurts nothing, so the action fails.
    exp = json.loads((EXPERIMENTS / "region-outage.json").read_text())
    exp["method"][0]["provider"]["arguments"]["track"] = "canary"
    exp["rollbacks"][0]["provider"]["arguments"]["track"] = "canary"  # a fault's rollback undoes that fault
    # Chaos Toolkit goes on to the method's probe after a failed action; nothing will move, so
    # keep its wait short rather than spend the full RTO target on it.
    exp["method"][1]["provider"]["arguments"]["within_s"] = 3
    path = tmp_path / "outage-of-nothing.json"
    path.write_text(json.dumps(exp))
    report = await run_drill(temporal_client, cfg, path)
    assert report.verdict is Verdict.FAILED, report
    assert not report.fault_injected
    assert any("kill-all-target-region-replicas" in r for r in report.reasons), report.reasons
    assert weights(cfg) == cfg.weights


async def test_region_outage_drill_passes_within_rto_and_history_lists_it(
    start_workers: StartWorkers, temporal_client: Client, fleet_config_path: Path
) -> None:
    cfg = await watched_fleet(start_workers, temporal_client)
    cfg_file = write_config(cfg, fleet_config_path.parent)
    code, out, err = await drctl_async(
        "drill",
        "run",
        str(EXPERIMENTS / "region-outage.json"),
        "--yes",
        "-c",
        str(cfg_file),
        "--output",
        "json",
    )
    assert code == 0, f"{out}\n{err}"
    report = DrillReport.model_validate_json(out[out.index("{") :])
    assert report.verdict is Verdict.PASS, report.reasons
    assert report.fault_injected and report.measured_rto_s is not None
    assert 0 < report.measured_rto_s < report.rto_target_s == cfg.objectives.rto_target_s
    assert report.failover and report.failover.found and report.failover_rto_s is not None
    assert [p["phase"] for p in report.failover_phases][:2] == ["claim", "preflight"]
    assert report.failback and report.failback.status == "COMPLETED"
    assert weights(cfg) == cfg.weights  # failed back to 60/40
    assert report.served_by.get("us-east-1", 0) > 0
    # The monitor's emergency failover records its data-loss exposure; the seeded replicas are in sync.
    assert (report.data_loss_s, report.data_loss_objects) == (0.0, 0), report
    # Judged by the objective too: the target held it (window 2 s in the test fleet) under the load.
    assert report.slo_restored_s is not None and report.slo_restored_s <= report.rto_target_s, report
    assert (report.slo_evidence or "").startswith(f"restored {report.slo_restored_s:.1f}s after the fault")
    assert "ttft_p99 <= " in (report.slo_evidence or "")

    code, out, err = await drctl_async("drill", "history", "-c", str(cfg_file), "--output", "json")
    assert code == 0, err
    rows = json.loads(out)
    mine = [r for r in rows if r["id"] == report.id]
    assert mine and mine[0]["verdict"] == "PASS" and mine[0]["measured_rto_s"] == report.measured_rto_s
    code, out, err = await drctl_async("drill", "history", "-c", str(cfg_file))
    assert code == 0 and "region-outage" in out and f"{report.measured_rto_s:.1f}s / 30s" in out, out
    assert "data loss" in out and "0.0s/0" in out, out
    code, out, _ = await drctl_async("drill", "report", report.id, "-c", str(cfg_file))
    assert code == 0 and "PASS" in out and "Measured RTO" in out
    assert "Data-loss exposure at failover: 0.0 s of replication lag, 0 object(s)" in out, out
    assert f"- SLO: {report.slo_evidence}" in out, out


async def test_a_drill_whose_objective_is_not_restored_fails_naming_ttft_p99(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig
) -> None:
    # Traffic moves and is served, but no replica answers its first token within 1 ms: the objective
    # cannot be met, so the drill FAILs however fast the failover was. A 12 s RTO target keeps the
    # failover's bounded wait for it (target + window) short.
    base = fast_config(fleet_config)
    slo = base.objectives.slo.model_copy(update={"ttft_p99_ms": 1.0})
    objectives = base.objectives.model_copy(update={"slo": slo, "rto_target_s": 12.0})
    cfg = await start_workers(cfg=base.model_copy(update={"objectives": objectives}))
    await watched(temporal_client, cfg)
    report = await run_drill(temporal_client, cfg, EXPERIMENTS / "region-outage.json")
    assert report.verdict is Verdict.FAILED, report
    assert report.failover and report.failover.status == "COMPLETED", report.failover
    assert report.failover.result["status"] == "succeeded" and report.slo_restored_s is None
    (why,) = [r for r in report.reasons if r.startswith("SLO ")]
    assert why.startswith("SLO not restored within 12s: ttft_p99 ") and " ms > 1 ms at " in why, why
    assert report.failback and report.failback.status == "COMPLETED"
    assert weights(cfg) == cfg.weights


async def test_replica_loss_drill_passes_without_failover(
    start_workers: StartWorkers, temporal_client: Client, tmp_path: Path
) -> None:
    cfg = await watched_fleet(start_workers, temporal_client)
    exp = json.loads((EXPERIMENTS / "replica-loss.json").read_text())
    exp["configuration"]["observe_s"] = 6  # long enough for several probe rounds at 2 s
    (tmp_path / "replica-loss.json").write_text(json.dumps(exp))
    report = await run_drill(temporal_client, cfg, tmp_path / "replica-loss.json")
    assert report.verdict is Verdict.PASS, report.reasons
    assert report.fault_injected and report.failover is None
    assert set(report.served_by) >= {"us-west-1", "us-east-1"}
    assert weights(cfg) == cfg.weights


async def test_schedule_lists_weekly_next_runs(temporal_client: Client, fleet_config_path: Path) -> None:
    cfg_path = str(fleet_config_path)
    name = f"weekly-{datetime.now(UTC).strftime('%H%M%S%f')}"
    code, out, err = await drctl_async(
        "drill",
        "schedule",
        "--cron",
        "0 3 * * MON",
        "--jitter",
        "30m",
        "--name",
        name,
        "-e",
        str(EXPERIMENTS / "region-outage.json"),
        "-e",
        str(EXPERIMENTS / "gateway-loss.json"),
        "-c",
        cfg_path,
        "--yes",  # creating a schedule asks first; a test has no terminal to answer it
    )
    assert code == 0, err
    try:
        code, out, err = await drctl_async("drill", "schedule", "list", "-c", cfg_path, "--output", "json")
        assert code == 0, err
        row = next(r for r in json.loads(out) if r["id"].endswith(f"/{name}"))
        runs = [datetime.fromisoformat(t) for t in row["next_runs"]]
        assert len(runs) >= 3 and not row["paused"]
        assert row["cron"] == "0 3 * * MON", row  # shown as the operator wrote it, not as calendar specs
        # Each drill it starts records who created the schedule.
        action = (await temporal_client.get_schedule_handle(row["id"]).describe()).schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow)
        by = f"schedule {row['id']} by {os_identity()}"
        assert action.typed_search_attributes.get(sa.INITIATOR) == by, action
        for t in runs:  # Mondays 03:00 UTC, plus at most the 30 min jitter
            base = t.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
            assert base.weekday() == 0 and base.hour == 3, t
        for a, b in zip(runs, runs[1:], strict=False):
            assert abs((b - a) - timedelta(days=7)) <= timedelta(minutes=30), (a, b)
        code, out, _ = await drctl_async("drill", "schedule", "list", "-c", cfg_path)
        assert code == 0 and name in out
        assert (await drctl_async("drill", "schedule", "pause", "--name", name, "-c", cfg_path))[0] == 0
        code, out, _ = await drctl_async("drill", "schedule", "list", "-c", cfg_path, "--output", "json")
        assert next(r for r in json.loads(out) if r["id"].endswith(f"/{name}"))["paused"] is True
    finally:
        assert (await drctl_async("drill", "schedule", "delete", "--name", name, "--yes", "-c", cfg_path))[
            0
        ] == 0
