"""Metrics recorded by the real activities, run against the session dev stack, read from the registry.

Each test uses its own fleet name, so the figures it reads are only its own.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import REGISTRY
from temporalio.testing import ActivityEnvironment

from activities.backup import BackupActivities
from activities.health import HealthActivities
from activities.outcomes import record_outcome
from activities.reports import ReportActivities
from activities.traffic import TrafficActivities
from drctl.client.connection import connect
from drctl.config.schema import FleetConfig
from drctl.devstack import stack
from drctl.models.activity_io import ProbeRequest
from drctl.models.backup import BackupRequest
from drctl.models.drill import DrillReport, Verdict
from drctl.models.outcome import OutcomeInput
from drctl.telemetry import metrics
from drctl.worker.fleet_metrics import FleetReader
from tests.support.wait import assert_eventually

pytestmark = pytest.mark.devstack


def _own(cfg: FleetConfig) -> FleetConfig:
    return cfg.model_copy(update={"name": f"m-{uuid.uuid4().hex[:10]}"})


def _value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


async def test_probe_records_status_ttft_failing_fraction_and_duration(
    fleet_config: FleetConfig, dev_stack: stack.StackInfo
) -> None:
    cfg = _own(fleet_config)
    batch = await ActivityEnvironment().run(
        HealthActivities(cfg).probe_regions, ProbeRequest(regions=cfg.region_names)
    )
    for p in batch.probes:
        labels = {"fleet": cfg.name, "region": p.region}
        assert _value("drctl_region_probe_status", **labels, status=p.status.value) == 1
        assert (
            sum(
                _value("drctl_region_probe_status", **labels, status=s) or 0
                for s in ("HEALTHY", "DEGRADED", "DOWN")
            )
            == 1
        )
        assert p.ttft_p50_ms is not None
        assert _value("drctl_region_ttft_p50_seconds", **labels) == pytest.approx(p.ttft_p50_ms / 1000)
        assert _value("drctl_region_failing_ratio", **labels) == p.failing_fraction
        assert _value("drctl_probe_duration_seconds_count", **labels) == 1
        assert _value("drctl_probes_total", **labels, status=p.status.value) == 1


def test_weights_are_exported_as_the_tier_reports_them(
    fleet_config: FleetConfig, dev_stack: stack.StackInfo
) -> None:
    cfg = _own(fleet_config)
    got = ActivityEnvironment().run(TrafficActivities(cfg).get_global_weights)
    for region, w in got.weights.items():
        assert _value("drctl_region_weight", fleet=cfg.name, region=region) == w


async def test_outcomes_count_results_rto_and_missed_targets(fleet_config: FleetConfig) -> None:
    fleet = _own(fleet_config).name
    env = ActivityEnvironment()
    for result, rto in (("succeeded", 12.0), ("succeeded", 41.5), ("failed", None)):
        await env.run(
            record_outcome,
            OutcomeInput(operation="failover", fleet=fleet, result=result, rto_s=rto, rto_target_s=30.0),
        )
    await env.run(
        record_outcome,
        OutcomeInput(operation="failback", fleet=fleet, result="rolled_back", rto_target_s=30.0),
    )
    assert _value("drctl_failovers_total", fleet=fleet, result="succeeded") == 2
    assert _value("drctl_failovers_total", fleet=fleet, result="failed") == 1
    assert _value("drctl_failover_rto_seconds_count", fleet=fleet) == 2
    assert _value("drctl_failover_rto_seconds_bucket", fleet=fleet, le="30.0") == 1
    assert _value("drctl_failover_rto_missed_total", fleet=fleet) == 1
    assert _value("drctl_failover_last_rto_seconds", fleet=fleet) == 41.5
    assert _value("drctl_failbacks_total", fleet=fleet, result="rolled_back") == 1


def _report(fleet: str, verdict: Verdict, finished: datetime, rto: float | None) -> DrillReport:
    return DrillReport(
        id=f"drill/{fleet}/{finished.strftime('%Y%m%dT%H%M%S%f')}",
        fleet=fleet,
        experiment="x",
        title="metrics test",
        target_region="us-west-1",
        verdict=verdict,
        started_at=finished - timedelta(seconds=60),
        finished_at=finished,
        expect_failover=True,
        measured_rto_s=rto,
        rto_target_s=30.0,
    )


async def test_drill_reports_count_verdicts_and_the_last_pass_survives_a_restart(
    fleet_config: FleetConfig, dev_stack: stack.StackInfo
) -> None:
    cfg = _own(fleet_config)
    passed_at = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    acts = ReportActivities(cfg)
    env = ActivityEnvironment()
    env.run(acts.store_report, _report(cfg.name, Verdict.PASS, passed_at, 14.2))
    env.run(acts.store_report, _report(cfg.name, Verdict.FAILED, passed_at + timedelta(minutes=5), 48.0))
    assert _value("drctl_drills_total", fleet=cfg.name, verdict="PASS") == 1
    assert _value("drctl_drills_total", fleet=cfg.name, verdict="FAILED") == 1
    assert _value("drctl_drill_rto_seconds_count", fleet=cfg.name) == 2
    # A FAILED drill after the pass does not move the last pass.
    assert _value("drctl_last_passing_drill_timestamp_seconds", fleet=cfg.name) == passed_at.timestamp()

    # A restarted worker has no gauges: its scrape-time reader finds the last pass in the history.
    other = cfg.model_copy(update={"name": f"m-{uuid.uuid4().hex[:10]}"})
    env.run(ReportActivities(other).store_report, _report(other.name, Verdict.PASS, passed_at, 10.0))
    metrics.LAST_PASSING_DRILL.remove(other.name)
    reader = FleetReader(other, await connect(other))
    await reader.refresh()  # starts the history read in the background

    async def last_pass() -> bool:
        return _value("drctl_last_passing_drill_timestamp_seconds", fleet=other.name) == passed_at.timestamp()

    await assert_eventually(last_pass, timeout_s=20, interval_s=0.2, what="last pass read from the history")
    assert _value("drctl_monitor_running", fleet=other.name) == 0  # no monitor/<fleet> workflow exists


async def test_backup_sets_the_last_successful_backup_time(
    fleet_config: FleetConfig, dev_stack: stack.StackInfo
) -> None:
    cfg = _own(fleet_config)
    before = time.time()
    req = BackupRequest(region="us-west-1", name=f"metrics-{uuid.uuid4().hex[:8]}", namespaces=["inference"])
    info = ActivityEnvironment().run(BackupActivities(cfg).create_backup, req)
    assert info.phase == "Completed"
    ts = _value("drctl_last_successful_backup_timestamp_seconds", fleet=cfg.name, region="us-west-1")
    assert ts is not None and before - 2 <= ts <= time.time() + 1
    assert _value("drctl_backups_total", fleet=cfg.name, region="us-west-1", result="succeeded") == 1
