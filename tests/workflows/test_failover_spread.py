"""A spread failover's other receivers are scaled, on a Temporal dev server with stand-in activities.

The dev stack has two regions, so a spread over several receivers is run here against stand-ins for
the activities a failover calls (a three-region fleet of replica counts): the monitor's emergency
scales each receiver after the shift, a normal one before it, a receiver's failed scale is recorded
and the failover goes on, and an operator's failover scales the target alone, with no patch marker.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowHistory
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from drctl.models.activity_io import (
    Capacity,
    DeploymentStatus,
    RegionRequest,
    ScaleInput,
    SetWeightsInput,
    VerifyInput,
    VerifyResult,
    WaitRolloutInput,
    Weights,
)
from drctl.models.failover import FailoverInput, FailoverResult
from drctl.models.fleet_spec import FleetSpec
from drctl.models.lock import LockGrant, LockRequest
from drctl.models.outcome import OutcomeInput
from drctl.models.rpo import RpoCheck, RpoCheckInput
from drctl.models.slo import SloWatchInput, SloWatchResult
from drctl.models.traffic import WeightsApplied
from tests.support.config import spec
from workflows.failover import Failover
from workflows.failover_receivers import SPREAD_SCALE_PATCH

REGIONS = ("us-west-1", "us-east-1", "eu-west-1")


@dataclass
class Fleet:
    """Three regions of 2 replicas at 50/30/20, and what was done to them, in order."""

    weights: dict[str, int] = field(
        default_factory=lambda: {"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20}
    )
    replicas: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REGIONS, 2))
    fail_scale: set[str] = field(default_factory=set)
    log: list[str] = field(default_factory=list)

    def activities(self) -> list[Any]:
        @activity.defn(name="acquire_fleet")
        async def acquire_fleet(inp: LockRequest) -> LockGrant:
            return LockGrant(granted=True)

        @activity.defn(name="check_rpo")
        async def check_rpo(inp: RpoCheckInput) -> RpoCheck:
            return RpoCheck(target=inp.target, rpo_target_s=5.0)

        @activity.defn(name="get_global_weights")
        async def get_global_weights() -> Weights:
            return Weights(weights=dict(self.weights))

        @activity.defn(name="set_global_weights")
        async def set_global_weights(inp: SetWeightsInput) -> WeightsApplied:
            self.log.append("shift")
            self.weights = dict(inp.weights)
            return WeightsApplied(weights=dict(inp.weights))

        @activity.defn(name="get_capacity")
        async def get_capacity(inp: RegionRequest) -> Capacity:
            self._on_own_queue(inp.region)
            n = self.replicas[inp.region]
            return Capacity(
                region=inp.region, deployment="llm-stable", replicas=n, ready_replicas=n, max_replicas=8
            )

        @activity.defn(name="scale_deployment")
        async def scale_deployment(inp: ScaleInput) -> DeploymentStatus:
            self._on_own_queue(inp.region)
            self.log.append(f"scale {inp.region} {inp.replicas}")
            if inp.region in self.fail_scale:
                raise ApplicationError(
                    f"{inp.region}: quota exceeded", type="ScaleFailed", non_retryable=True
                )
            self.replicas[inp.region] = inp.replicas
            return self._status(inp.region)

        @activity.defn(name="wait_rollout")
        async def wait_rollout(inp: WaitRolloutInput) -> DeploymentStatus:
            self._on_own_queue(inp.region)
            return self._status(inp.region)

        @activity.defn(name="verify_global")
        async def verify_global(inp: VerifyInput) -> VerifyResult:
            serving = [r for r, w in self.weights.items() if w > 0]
            return VerifyResult(
                total=inp.requests, ok=inp.requests, errors=0, by_region={serving[0]: inp.requests}
            )

        @activity.defn(name="watch_slo")
        async def watch_slo(inp: SloWatchInput) -> SloWatchResult:
            raise ApplicationError("no metrics here", non_retryable=True)

        @activity.defn(name="record_outcome")
        async def record_outcome(inp: OutcomeInput) -> None:
            return None

        return [
            acquire_fleet,
            check_rpo,
            get_global_weights,
            set_global_weights,
            get_capacity,
            scale_deployment,
            wait_rollout,
            verify_global,
            watch_slo,
            record_outcome,
        ]

    def _on_own_queue(self, region: str) -> None:
        # A region's cluster is read and scaled by that region's worker, never the target's.
        assert activity.info().task_queue.startswith(f"q-{region}-"), (region, activity.info().task_queue)

    def _status(self, region: str) -> DeploymentStatus:
        n = self.replicas[region]
        return DeploymentStatus(
            region=region,
            deployment="llm-stable",
            replicas=n,
            ready_replicas=n,
            updated_replicas=n,
            available_replicas=n,
            rolled_out=True,
        )


def _spec(run: str) -> FleetSpec:
    base = spec([("us-west-1", 50, 2), ("us-east-1", 30, 2), ("eu-west-1", 20, 2)])
    regions = [r.model_copy(update={"queue": f"q-{r.name}-{run}"}) for r in base.regions]
    return base.model_copy(update={"fleet": f"t-{run}", "task_queue": f"q-{run}", "regions": regions})


async def _failover(
    client: Client, fleet: Fleet, spec_over: dict[str, Any] | None = None, **over: Any
) -> tuple[FailoverResult, WorkflowHistory]:
    run = uuid.uuid4().hex[:8]
    s = _spec(run).model_copy(update=spec_over or {})
    inp = FailoverInput(spec=s, target="us-west-1", source="us-east-1", **over)
    acts = fleet.activities()
    workers = [Worker(client, task_queue=s.task_queue, workflows=[Failover], activities=acts)] + [
        Worker(client, task_queue=r.queue, activities=acts) for r in s.regions
    ]
    for w in workers:
        await w.__aenter__()
    try:
        handle = await client.start_workflow(
            Failover.run, inp, id=f"failover/{s.fleet}", task_queue=s.task_queue
        )
        res = await handle.result()
        return res, await handle.fetch_history()
    finally:
        for w in workers:
            await w.__aexit__(None, None, None)


def _markers(history: WorkflowHistory) -> list[str]:
    """The patch ids the run recorded."""
    return [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]


SPREAD: dict[str, Any] = {"receivers": ["us-west-1", "eu-west-1"]}


@pytest.mark.parametrize("emergency", [True, False])
async def test_every_receiver_whose_share_rises_is_scaled_for_its_part(
    temporal_env: WorkflowEnvironment, emergency: bool
) -> None:
    fleet = Fleet()
    res, history = await _failover(temporal_env.client, fleet, emergency=emergency, force=True, **SPREAD)
    assert res.status == "succeeded", res.error
    assert res.weights_after == {"us-west-1": 71, "us-east-1": 0, "eu-west-1": 29}
    # 2 own + 70 % (target) and 30 % (eu-west-1) of the 2 replicas that served us-east-1.
    assert res.target_replicas == 4 and fleet.replicas == {"us-west-1": 4, "us-east-1": 2, "eu-west-1": 3}
    assert res.receivers_scaled["eu-west-1"].replicas == 3 and res.receivers_scaled["eu-west-1"].error is None
    assert res.plan is not None and res.plan.receivers_replicas["eu-west-1"].planned == 3
    scales = {"scale us-west-1 4", "scale eu-west-1 3"}
    # Emergency: the shift first, then both scale; normal: both scale, then the shift.
    assert set(fleet.log[1:] if emergency else fleet.log[:2]) == scales, fleet.log
    assert fleet.log[0 if emergency else 2] == "shift", fleet.log
    assert SPREAD_SCALE_PATCH in _markers(history)


async def test_a_receivers_failed_scale_is_recorded_and_the_failover_goes_on(
    temporal_env: WorkflowEnvironment,
) -> None:
    for emergency in (True, False):
        fleet = Fleet(fail_scale={"eu-west-1"})
        res, _ = await _failover(temporal_env.client, fleet, emergency=emergency, force=True, **SPREAD)
        assert res.status == "succeeded", res.error
        assert res.target_replicas == 4 and res.weights_after["eu-west-1"] == 29
        failed = res.receivers_scaled["eu-west-1"]
        assert failed.replicas is None and failed.error is not None and "quota exceeded" in failed.error
        assert fleet.replicas["eu-west-1"] == 2


async def test_an_operators_failover_scales_the_target_alone(temporal_env: WorkflowEnvironment) -> None:
    fleet = Fleet()
    res, history = await _failover(temporal_env.client, fleet, emergency=True, force=True)
    assert res.status == "succeeded", res.error
    assert res.weights_after == {"us-west-1": 80, "us-east-1": 0, "eu-west-1": 20}
    assert res.target_replicas == 4 and res.receivers_scaled == {}
    assert fleet.log == ["shift", "scale us-west-1 4"]
    assert SPREAD_SCALE_PATCH not in _markers(history)
