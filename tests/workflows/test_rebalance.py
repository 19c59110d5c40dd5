"""The Rebalance operation against the real dev stack: one shed or return step under the fleet lock.

What a user sees: the global HAProxy weights, the Deployment's replicas, the workflow's result.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client
from temporalio.client import Client, WorkflowHandle

from drctl.client.operations import start_operation
from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.models.failover import FailoverResult
from drctl.models.fleet_spec import FleetSpec
from drctl.models.rebalance import RebalanceInput, RebalanceResult
from drctl.providers.kube_client import api_client_for
from drctl.providers.traffic_factory import global_traffic
from tests.support.wait import assert_eventually
from tests.support.workers import StartWorkers, admin, replicas, start_failover, weights
from workflows.rebalance import Rebalance

pytestmark = [pytest.mark.slow, pytest.mark.devstack]

CONFIGURED = {"us-west-1": 60, "us-east-1": 40}


async def _start(client: Client, cfg: FleetConfig, **fields: Any) -> WorkflowHandle[Any, Any]:
    spec = fields.pop("spec", None) or FleetSpec.from_config(cfg)
    return await start_operation(
        client,
        cfg,
        Rebalance.run,
        RebalanceInput(spec=spec, **fields),
        operation="rebalance",
        workflow_id=f"rebalance/{cfg.name}",
    )


async def _step(
    client: Client,
    cfg: FleetConfig,
    action: str,
    before: dict[str, int],
    after: dict[str, int],
    **fields: Any,
) -> RebalanceResult:
    """Run one `action` step planned from `before` to `after` and wait for its result."""
    handle = await _start(client, cfg, action=action, weights_before=before, weights_after=after, **fields)
    return await asyncio.wait_for(result_of(handle, RebalanceResult), 60)


async def test_a_shed_pre_scales_the_target_and_the_last_return_scales_it_back(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers()
    res = await _step(
        temporal_client,
        cfg,
        "shed",
        CONFIGURED,
        {"us-west-1": 45, "us-east-1": 55},
        prescale={"us-east-1": 3, "us-west-1": 4},  # us-west-1 loses share: never scaled
        reason="us-west-1 capacity short",
    )
    assert res.status == "succeeded", res.error
    assert weights(cfg) == {"us-west-1": 45, "us-east-1": 55}
    assert res.scaled == {"us-east-1": 3} and replicas(cfg, "us-east-1") == 3
    assert replicas(cfg, "us-west-1") == 2
    assert [p.phase for p in res.phases][:4] == ["claim", "read-weights", "pre-scale", "shift"]

    # The return step that gives the last share back scales us-east-1 back to its configured 2.
    back = await _step(
        temporal_client,
        cfg,
        "return",
        {"us-west-1": 45, "us-east-1": 55},
        CONFIGURED,
        scale_back={"us-east-1": 2, "us-west-1": 2},  # us-west-1 runs 2 already: left alone
    )
    assert back.status == "succeeded", back.error
    assert weights(cfg) == CONFIGURED
    assert back.scaled_back == {"us-east-1": 2} and not back.scale_back_errors
    assert replicas(cfg, "us-east-1") == 2 and replicas(cfg, "us-west-1") == 2
    assert [p.phase for p in back.phases][-2:] == ["analyse", "scale-back"]


async def test_a_failed_pre_scale_is_named_and_the_shift_stands(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers()
    east, name = cfg.region("us-east-1"), cfg.workload.deployment_name("stable")
    with api_client_for(east.kube) as api:
        apps = client.AppsV1Api(api)
        # us-east-1's Deployment is gone (deleted by hand, say): its pre-scale cannot even read it.
        kept = apps.read_namespaced_deployment(name, east.kube.namespace)
        apps.delete_namespaced_deployment(name, east.kube.namespace)
        try:
            handle = await _start(
                temporal_client,
                cfg,
                action="shed",
                weights_before=CONFIGURED,
                weights_after={"us-west-1": 50, "us-east-1": 50},
                prescale={"us-east-1": 3},
                reason="us-west-1 capacity short",
            )
            res = await asyncio.wait_for(result_of(handle, RebalanceResult), 60)
        finally:
            # Back as it was (the baseline reset scales Deployments; it does not create them).
            kept.metadata = client.V1ObjectMeta(name=name, labels=kept.metadata.labels)
            kept.status = None
            apps.create_namespaced_deployment(east.kube.namespace, kept)
    assert res.status == "succeeded", res.error
    assert weights(cfg) == {"us-west-1": 50, "us-east-1": 50}
    assert res.scaled == {}
    assert (
        "404" in res.prescale_errors["us-east-1"] or "not found" in res.prescale_errors["us-east-1"].lower()
    )


async def test_a_step_planned_from_weights_that_moved_since_changes_nothing(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers()
    global_traffic(cfg).set_weights({"us-west-1": 50, "us-east-1": 50})  # an operator moved them
    res = await _step(temporal_client, cfg, "shed", CONFIGURED, {"us-west-1": 40, "us-east-1": 60})
    assert res.status == "stale" and "not us-west-1 60 / us-east-1 40 as planned" in (res.error or "")
    assert weights(cfg) == {"us-west-1": 50, "us-east-1": 50}


async def test_a_return_step_that_regresses_is_rolled_back(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers()
    shed = {"us-west-1": 30, "us-east-1": 70}
    global_traffic(cfg).set_weights(shed)
    admin(cfg, "us-west-1", "/faults/inference", {"down": True})
    res = await _step(temporal_client, cfg, "return", shed, {"us-west-1": 45, "us-east-1": 55})
    assert res.status == "rolled_back" and "us-west-1" in (res.error or "")
    assert weights(cfg) == shed
    assert [c.weights for c in res.changes] == [{"us-west-1": 45, "us-east-1": 55}, shed]


async def test_a_failover_preempts_a_running_rebalance_and_keeps_the_weights(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers()
    spec = FleetSpec.from_config(cfg)
    # A return step waits 30 s before its analysis: the failover arrives meanwhile.
    spec.rebalance_limits = spec.rebalance_limits.model_copy(update={"return_step_interval_s": 30.0})
    shed = {"us-west-1": 40, "us-east-1": 60}
    global_traffic(cfg).set_weights(shed)
    handle = await _start(
        temporal_client, cfg, spec=spec, action="return", weights_before=shed, weights_after=CONFIGURED
    )

    async def applied() -> bool:
        return weights(cfg) == CONFIGURED

    await assert_eventually(applied, timeout_s=20, what="the return step applied")
    fo = await start_failover(temporal_client, cfg, target="us-east-1")
    fres = await asyncio.wait_for(result_of(fo, FailoverResult), 60)
    assert fres.status == "succeeded", fres.error
    assert fres.preempted == [f"rebalance/{cfg.name}"]
    res = await asyncio.wait_for(result_of(handle, RebalanceResult), 30)
    assert res.status == "preempted" and "failover" in (res.error or "")
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}  # the rebalance touched nothing after it
