"""The other shipped faults end to end, and stopping a drill halfway: on the dev stack, with the
real monitor, failover, failback, `chaos run` subprocess and S3."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from temporalio.client import Client

from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.models.drill import DrillReport, Verdict
from tests.support.cli import drctl_async
from tests.support.config import write_config
from tests.support.drills import (
    EXPERIMENTS,
    NO_FAULTS,
    fault_held,
    held_outage,
    run_drill,
    start_drill,
    watched_fleet,
)
from tests.support.wait import assert_eventually
from tests.support.workers import StartWorkers, admin, served_by, weights

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


def assert_passed_with_failover(report: DrillReport, cfg: FleetConfig) -> None:
    """PASS, and every figure that PASS stands on is really there."""
    assert report.verdict is Verdict.PASS, report.reasons
    assert report.fault_injected and report.fault_at is not None
    assert report.measured_rto_s is not None and 0 < report.measured_rto_s < report.rto_target_s == 30
    assert report.failover and report.failover.found and report.failover.status == "COMPLETED"
    # The failover closed before the RTO target ran out (ordering against the fleet's own target).
    assert report.failover_done_after_s is not None and report.failover_done_after_s < report.rto_target_s
    assert report.journal and report.journal.steady_state_before_met and report.journal.rollbacks_ok == 1
    assert report.served_by.get("us-east-1", 0) > 0
    assert report.failback and report.failback.status == "COMPLETED"
    assert weights(cfg) == cfg.weights  # failed back to 60/40
    assert admin(cfg, "us-west-1", "/faults") == NO_FAULTS


async def test_region_degradation_drill_fails_over_within_rto(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    # health.fail_on_degraded is on by default, so a slow, half-failing region must fail over:
    # the experiment says so (expect_failover true) and the drill holds the fleet to it.
    cfg = await watched_fleet(start_workers, temporal_client)
    assert cfg.health.fail_on_degraded
    report = await run_drill(temporal_client, cfg, EXPERIMENTS / "region-degradation.json")
    assert_passed_with_failover(report, cfg)
    assert report.failover and "us-west-1" in json.dumps(report.failover.result)


async def test_gateway_loss_drill_fails_over_within_rto(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await watched_fleet(start_workers, temporal_client)
    report = await run_drill(temporal_client, cfg, EXPERIMENTS / "gateway-loss.json")
    assert_passed_with_failover(report, cfg)
    # The users saw the gateway go: requests failed until the weights moved.
    assert report.errors > 0 and report.error_window_s > 0


async def _fleet_serves(cfg: FleetConfig) -> bool:
    counts = await served_by(cfg, 10)
    return set(counts) == {"us-west-1", "us-east-1"}


@pytest.mark.parametrize("how", ["ops-abort", "temporal-cancel"])
async def test_stopping_a_running_drill_rolls_back_and_reports_aborted(
    how: str, start_workers: StartWorkers, temporal_client: Client, fleet_config_path: Path, tmp_path: Path
) -> None:
    cfg = await start_workers()
    handle = await start_drill(temporal_client, cfg, held_outage(tmp_path))
    await assert_eventually(lambda: fault_held(cfg), timeout_s=60, what="the outage injected and held")
    if how == "ops-abort":
        code, out, err = await drctl_async(
            "ops",
            "abort",
            handle.id,
            "--reason",
            "drill window closed",
            "--yes",
            "-c",
            str(write_config(cfg, fleet_config_path.parent)),
        )
        assert code == 0 and "stopping the experiment" in out, f"{out}\n{err}"
        reason = "drill window closed"
    else:
        await handle.cancel()
        reason = "workflow cancel"
    report = await asyncio.wait_for(result_of(handle, DrillReport), 120)
    assert report.verdict is Verdict.ABORTED, report
    assert any(reason in r for r in report.reasons), report.reasons
    assert any("rollback(s) succeeded" in r for r in report.reasons), report.reasons
    assert report.fault_injected and report.journal and report.journal.rollbacks_ok == 1
    # Rolled back for real: the admin API holds no fault, and both regions serve again.
    assert admin(cfg, "us-west-1", "/faults") == NO_FAULTS
    await assert_eventually(lambda: _fleet_serves(cfg), timeout_s=30, what="both regions serving again")
    assert weights(cfg) == cfg.weights
    if how == "ops-abort":
        # A finished drill has nothing left to abort: a clear refusal, not a traceback.
        code, _, err = await drctl_async(
            "ops", "abort", handle.id, "--yes", "-c", str(write_config(cfg, fleet_config_path.parent))
        )
        assert code != 0 and "Traceback" not in err and handle.id in err, err
