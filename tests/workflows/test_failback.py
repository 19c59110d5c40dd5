"""Failback against the real dev stack: stepped return to 60/40, and refusal while the region is down."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client

from drctl.models.failover import FailbackInput, FailbackResult
from drctl.models.ops import FleetSpec
from drctl.operations import start_operation
from drctl.providers.kubernetes import KubernetesPlatform
from drctl.providers.traffic_factory import global_traffic
from tests.workflows.conftest import StartWorkers, admin, served_by, weights
from tests.workflows.test_failover import replicas
from workflows.failback import Failback

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


async def test_failback_steps_back_to_configured_weights_and_scales_down(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers()
    # The state a failover leaves: everything on us-east-1, scaled up.
    global_traffic(cfg).set_weights({"us-west-1": 0, "us-east-1": 100})
    KubernetesPlatform(cfg.region("us-east-1")).scale(cfg.workload.deployment_name("stable"), 5)
    handle = await start_operation(temporal_client, cfg, Failback.run, FailbackInput(spec=FleetSpec.from_config(cfg)),
                                   operation="failback", workflow_id=f"failback/{cfg.name}")
    res = await asyncio.wait_for(handle.result(), 90)
    assert res.status == "succeeded", res.error
    assert res.steps_done == res.steps_planned == 2
    assert weights(cfg) == {"us-west-1": 60, "us-east-1": 40}
    assert res.scaled_back == {"us-east-1": 2} and replicas(cfg, "us-east-1") == 2
    phases = [p.phase for p in res.phases]
    assert phases[:3] == ["claim", "stabilize", "step-1-of-2"] and "scale-back" in phases
    assert set(await served_by(cfg, 40)) == {"us-west-1", "us-east-1"}


async def test_failback_refuses_while_the_region_is_down(start_workers: StartWorkers, temporal_client: Client) -> None:
    cfg = await start_workers()
    global_traffic(cfg).set_weights({"us-west-1": 0, "us-east-1": 100})
    admin(cfg, "us-west-1", "/faults/replicas", {"action": "kill", "track": "stable", "stay_down": True})
    inp = FailbackInput(spec=FleetSpec.from_config(cfg), stabilization_window_s=0)
    handle = await start_operation(temporal_client, cfg, Failback.run, inp, operation="failback",
                                   workflow_id=f"failback/{cfg.name}")
    res: FailbackResult = await asyncio.wait_for(handle.result(), 60)
    assert res.status == "failed" and "us-west-1 is DOWN" in (res.error or "")
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}  # no traffic handed to a dead region
