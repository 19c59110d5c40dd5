"""Kill points: SIGKILL the worker process holding an activity in each phase, start a new one, and
check the operation still ends where a clean run would (weights, tracks, replicas, releases, no
fault, lock released, verdict). The README's "Kill points" table is generated from KILL_POINTS."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from drctl.config import FleetConfig
from tests.crash.harness import KillPoint, RegionWorkers, assert_end_state, run_kill_point
from tests.crash.scenarios import SCENARIOS

pytestmark = [pytest.mark.slow, pytest.mark.devstack]

# The kill points the suite tries. A fast activity is caught in flight by stalling what it talks to
# (`stall`) once the activity before it has been scheduled (`stall_after`).
KILL_POINTS = [
    KillPoint("Failover", "preflight", "probe_region", stall="gateway:us-east-1"),
    KillPoint("Failover", "scale target", "wait_rollout"),
    KillPoint("Failover", "set weights", "set_global_weights", stall="global", stall_after="wait_rollout"),
    KillPoint("Failover", "verify", "verify_global", tweak={"failover": {"verify_requests": 60}}),
    KillPoint("Failback", "read weights", "get_global_weights", stall="global"),
    KillPoint("Failback", "stabilize", "probe_regions", stall="gateway:us-west-1"),
    KillPoint("Failback", "step 1", "set_global_weights", stall="global", stall_after="probe_regions"),
    KillPoint("Failback", "step 2", "set_global_weights", nth=2, stall="global", stall_after="probe_regions",
              stall_after_nth=3),
    KillPoint("Upgrade", "backup", "create_backup"),
    KillPoint("Upgrade", "deploy canary", "wait_rollout"),
    KillPoint("Upgrade", "warm-up", "warm_up"),
    KillPoint("Upgrade", "weight step", "set_track_weights", stall="gateway:us-west-1", stall_after="warm_up"),
    KillPoint("Upgrade", "analysis", "analyze_tracks"),
    KillPoint("Upgrade", "promote", "wait_rollout", nth=2),
    KillPoint("Upgrade (bad release)", "rollback", "set_track_weights", nth=2, stall="gateway:us-west-1",
              stall_after="analyze_tracks"),
    KillPoint("Migration", "backup", "create_backup"),
    KillPoint("Migration", "restore", "restore_backup"),
    KillPoint("Migration", "ready", "wait_rollout"),
    KillPoint("Migration", "warm-up", "warm_up"),
    KillPoint("Migration", "step 50 % analysis", "analyze_tracks"),
    KillPoint("Migration", "step 100 % weights", "set_global_weights", nth=2, stall="global",
              stall_after="analyze_tracks"),
]


@pytest.mark.parametrize("kp", KILL_POINTS, ids=lambda kp: kp.id)
async def test_kill_point(kp: KillPoint, crash_fleet: FleetConfig, region_workers: RegionWorkers,
                          temporal_client: Client) -> None:
    scenario = SCENARIOS[kp.op]
    res = await run_kill_point(temporal_client, crash_fleet, region_workers, scenario, kp)
    await assert_end_state(temporal_client, crash_fleet, res, scenario.expect(crash_fleet))
