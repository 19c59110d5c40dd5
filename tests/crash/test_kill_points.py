"""Kill points: SIGKILL the worker process holding an activity in each phase, start a new one, and
check the operation still ends where a clean run would (weights, tracks, replicas, releases, no
fault, lock released, verdict). The table of kill points is tests/crash/points.py."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from drctl.config.schema import FleetConfig
from tests.crash.endstate import assert_end_state
from tests.crash.harness import KillPoint, RegionWorkers, run_kill_point
from tests.crash.points import KILL_POINTS
from tests.crash.scenarios import SCENARIOS

pytestmark = [pytest.mark.slow, pytest.mark.devstack, pytest.mark.crash]


@pytest.mark.parametrize("kp", KILL_POINTS, ids=lambda kp: kp.id)
async def test_kill_point(
    kp: KillPoint, crash_fleet: FleetConfig, region_workers: RegionWorkers, temporal_client: Client
) -> None:
    scenario = SCENARIOS[kp.op]
    res = await run_kill_point(temporal_client, crash_fleet, region_workers, scenario, kp)
    await assert_end_state(temporal_client, crash_fleet, res, scenario.expect(crash_fleet))
