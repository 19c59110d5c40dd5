"""Failback against the real dev stack: stepped return to 60/40, and refusal while the region is down."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client

from drctl.client.operations import start_operation
from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.models import search_attributes as sa
from drctl.models.failover import FailbackInput, FailbackResult
from drctl.models.fleet_spec import FleetSpec
from drctl.providers.kubernetes import MERGE, KubernetesPlatform
from drctl.providers.traffic_factory import global_traffic
from tests.support.config import tuned
from tests.support.wait import assert_eventually
from tests.support.workers import (
    StartWorkers,
    admin,
    fast_config,
    kill_stable,
    replicas,
    served_by,
    start_failback,
    weights,
)
from workflows.failback import Failback

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


async def test_failback_steps_back_to_configured_weights_and_scales_down(
    start_workers: StartWorkers, temporal_client: Client, request: pytest.FixtureRequest
) -> None:
    cfg = await start_workers()
    # The state a failover leaves: everything on us-east-1, scaled up.
    global_traffic(cfg).set_weights({"us-west-1": 0, "us-east-1": 100})
    east = KubernetesPlatform(cfg.region("us-east-1"))
    stable = cfg.workload.deployment_name("stable")
    east.scale(stable, 5)
    # us-east-1's stable Deployment is also Argo CD's (label tracking): the scale-back must say so.
    marked = {"metadata": {"labels": {"app.kubernetes.io/instance": "llm-us-east-1"}}}
    east.apps.patch_namespaced_deployment(stable, east.namespace, marked, _content_type=MERGE)
    unmarked = {"metadata": {"labels": {"app.kubernetes.io/instance": None}}}
    request.addfinalizer(
        lambda: east.apps.patch_namespaced_deployment(stable, east.namespace, unmarked, _content_type=MERGE)
    )
    handle = await start_failback(temporal_client, cfg)
    res = await asyncio.wait_for(result_of(handle, FailbackResult), 90)
    assert res.status == "succeeded", res.error
    # Its HPA, which the scale-back moves too, carries no marker: it is not recorded.
    assert [(g.region, g.kind, g.name, g.field, g.tracking) for g in res.gitops_managed] == [
        ("us-east-1", "Deployment", stable, "spec.replicas", "app.kubernetes.io/instance=llm-us-east-1")
    ]
    assert res.steps_done == res.steps_planned == 2
    assert weights(cfg) == {"us-west-1": 60, "us-east-1": 40}
    assert res.scaled_back == {"us-east-1": 2} and replicas(cfg, "us-east-1") == 2
    phases = [p.phase for p in res.phases]
    assert phases[:3] == ["claim", "stabilize", "step-1-of-2"] and "scale-back" in phases
    assert set(await served_by(cfg, 40)) == {"us-west-1", "us-east-1"}


async def test_failback_refuses_while_the_region_is_down(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers()
    global_traffic(cfg).set_weights({"us-west-1": 0, "us-east-1": 100})
    kill_stable(cfg, "us-west-1")
    inp = FailbackInput(spec=FleetSpec.from_config(cfg), stabilization_window_s=0)
    handle = await start_operation(
        temporal_client, cfg, Failback.run, inp, operation="failback", workflow_id=f"failback/{cfg.name}"
    )
    res: FailbackResult = await asyncio.wait_for(result_of(handle, FailbackResult), 60)
    assert res.status == "failed" and "us-west-1 is DOWN" in (res.error or "")
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}  # no traffic handed to a dead region


async def test_failback_rolls_back_one_step_when_the_region_regresses(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig
) -> None:
    base = fast_config(fleet_config)
    # Four steps (0/100 → 15/85 → 30/70 → 45/55 → 60/40) with an interval long enough to break
    # us-west-1 while it holds step 1's share, before the post-step probe looks at it.
    cfg = await start_workers(cfg=tuned(base, "failback", steps=4, step_interval_s=4.0))
    global_traffic(cfg).set_weights({"us-west-1": 0, "us-east-1": 100})
    seen: list[dict[str, int]] = []
    stop = asyncio.Event()

    async def record_weights() -> None:
        # Every distinct state the global tier passes through, read from HAProxy itself.
        # One last read after the stop: the rollback may land between two samples and the result.
        while True:
            stopping = stop.is_set()
            w = await asyncio.to_thread(weights, cfg)
            if not seen or seen[-1] != w:
                seen.append(w)
            if stopping:
                return
            await asyncio.sleep(0.05)

    recorder = asyncio.create_task(record_weights())
    try:
        handle = await start_failback(temporal_client, cfg)

        async def at_step_one() -> bool:
            return weights(cfg) == {"us-west-1": 15, "us-east-1": 85}

        await assert_eventually(at_step_one, timeout_s=20, interval_s=0.05, what="failback step 1 applied")
        admin(cfg, "us-west-1", "/faults/inference", {"error_rate": 1.0})
        res: FailbackResult = await asyncio.wait_for(result_of(handle, FailbackResult), 30)
    finally:
        stop.set()
        await recorder
    assert res.status == "rolled_back", res
    assert (res.error or "").startswith("step 1 regressed (us-west-1 ") and "rolled back one step" in (
        res.error or ""
    )
    assert (res.steps_done, res.steps_planned) == (0, 4)
    assert res.weights_after == weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
    # Back down to the previous step's value, never past it, never through an all-zero state.
    # A step sets the two regions' weights one after the other (the rising one first), so a
    # sample can land between them: us-west-1's own values are what must go 0, 15, 0.
    west = [w["us-west-1"] for w in seen]
    assert [v for i, v in enumerate(west) if i == 0 or west[i - 1] != v] == [0, 15, 0], seen
    assert all(sum(w.values()) > 0 for w in seen), seen
    phases = [p.phase for p in res.phases]
    assert "step-1-of-4" in phases and "step-2-of-4" not in phases and "scale-back" not in phases
    desc = await handle.describe()
    assert desc.typed_search_attributes.get(sa.VERDICT) == "rolled_back"
    assert await served_by(cfg, 20) == {"us-east-1": 20}  # users are still served, by us-east-1
