"""The Temporal dev server restarted (same db file) while the monitor watches, then mid-failover: the
monitor resumes without a duplicate failover, and the failover it started completes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporalio.client import Client

from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.devstack import restart
from drctl.models.failover import FailoverResult
from drctl.models.monitor import MonitorStatus
from tests.crash.endstate import EndState, assert_end_state
from tests.crash.harness import RegionWorkers, wait_scheduled
from tests.crash.scenarios import STABLE_ONLY
from tests.support.wait import assert_eventually
from tests.support.workers import healthy_rounds as _healthy_rounds
from tests.support.workers import kill_stable
from tests.support.workers import monitor_handle as _monitor
from tests.support.workers import monitor_status as _status

pytestmark = [pytest.mark.slow, pytest.mark.devstack, pytest.mark.crash]


async def _failovers_since(client: Client, cfg: FleetConfig, since: datetime) -> list[str]:
    """Run ids of every Failover execution of the fleet started after `since` (closed or not)."""
    query = f"WorkflowId = 'failover/{cfg.name}' AND StartTime > '{since.isoformat()}'"
    return [ex.run_id async for ex in client.list_workflows(query) if ex.run_id]


async def test_temporal_restart_mid_monitor_and_mid_failover(
    crash_fleet: FleetConfig,
    crash_config: tuple[FleetConfig, Path],
    region_workers: RegionWorkers,
    temporal_client: Client,
) -> None:
    cfg, path = crash_config
    assert cfg.failover.policy == "automatic"
    since = datetime.now(UTC)
    mon = await _monitor(temporal_client, cfg)
    await assert_eventually(
        lambda: _healthy_rounds(mon), timeout_s=30, what="monitor sees both regions healthy"
    )

    # Mid-monitor: the server goes away and comes back on the same db; the run and its state survive.
    before = (await _status(mon)).probe_rounds
    await asyncio.to_thread(restart.restart_temporal, cfg, path)

    async def rounds_after_restart() -> MonitorStatus | None:
        st = await _status(mon)
        return st if st.probe_rounds >= before + 3 else None

    st = await assert_eventually(
        rounds_after_restart, timeout_s=60, interval_s=0.5, what="monitor rounds resume"
    )
    assert not st.failed_over and st.active_failover is None and st.alert is None, st
    assert await _failovers_since(temporal_client, cfg, since) == []  # a healthy fleet: no failover

    # Mid-failover: us-west-1 goes down, the monitor starts one failover, and the server restarts
    # once that failover is under way (its preflight has scheduled work; it then runs for seconds).
    kill_stable(cfg, "us-west-1")
    # This outage's run, not an earlier failover/<fleet> that earlier tests closed.
    runs = await assert_eventually(
        lambda: _failovers_since(temporal_client, cfg, since),
        timeout_s=90,
        interval_s=0.1,
        what="the monitor starts a failover",
    )
    failover = temporal_client.get_workflow_handle(f"failover/{cfg.name}", run_id=runs[0])
    await wait_scheduled(failover, "get_global_weights", timeout_s=30)
    assert (await failover.describe()).status.name == "RUNNING"  # type: ignore[union-attr]
    await asyncio.to_thread(restart.restart_temporal, cfg, path)
    res = await asyncio.wait_for(result_of(failover, FailoverResult), 120)
    assert res.source == "us-west-1" and res.target == "us-east-1", res
    await assert_end_state(
        temporal_client,
        cfg,
        res,
        EndState(
            verdict="succeeded",
            weights={"us-west-1": 0, "us-east-1": 100},
            tracks={r: STABLE_ONLY for r in cfg.region_names},
            replicas={"us-east-1": 4},
            releases={r: cfg.workload.image for r in cfg.region_names},
        ),
        faults_expected=True,
    )

    async def recorded() -> MonitorStatus | None:
        s = await _status(mon)
        return s if s.last_failover and s.last_failover.status == "succeeded" else None

    st = await assert_eventually(
        recorded, timeout_s=30, interval_s=0.5, what="the monitor records the failover"
    )
    assert st.active_failover is None and [f.target for f in st.failed_over] == ["us-east-1"], st
    # Exactly one failover for one outage, across both restarts; the monitor is still watching.
    await asyncio.sleep(cfg.health.interval_s * 2)
    assert len(await _failovers_since(temporal_client, cfg, since)) == 1
    assert (await mon.describe()).status.name == "RUNNING"  # type: ignore[attr-defined]
