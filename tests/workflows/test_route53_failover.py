"""Failover and failback with a Route 53 global tier whose changes stay PENDING (tests/support/route53_standin.py).

The stand-in answers PENDING for longer than any activity's start-to-close, as Route 53 does for up
to a minute. Clients follow DNS: once a change is visible (`visible_after_s`), the test moves the
dev stack's global HAProxy to the weights Route 53 now holds, so verification through the global
endpoint sees traffic move only when resolvers would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from drctl.client.operations import start_operation
from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig, Route53Global
from drctl.models.failover import FailbackInput, FailoverResult
from drctl.models.fleet_spec import FleetSpec
from drctl.providers.haproxy import HAProxyGlobalTraffic
from drctl.providers.route53 import Route53GlobalTraffic
from tests.support.config import tuned
from tests.support.moto import aws_client
from tests.support.route53_standin import Route53StandIn
from tests.support.wait import assert_eventually
from tests.support.workers import StartWorkers, fast_config, kill_stable, served_by, start_failover
from workflows.failback import Failback

pytestmark = [pytest.mark.slow, pytest.mark.devstack]

TTL_S = 5
# 15 s: longer than the apply activity's 10 s start-to-close, so an apply that waited for INSYNC
# would time out and re-send the change. Real Route 53 takes up to ~60 s; set
# DRCTL_TEST_ROUTE53_PENDING_S=60 to run the same test at that length.
PENDING_S = float(os.environ.get("DRCTL_TEST_ROUTE53_PENDING_S", "15"))


def with_route53(
    cfg: FleetConfig, endpoint_url: str, zone_id: str, zone: str, propagation_timeout_s: float
) -> FleetConfig:
    tier = Route53Global(
        kind="route53",
        hosted_zone_id=zone_id,
        record_name=f"api.{zone}",
        ttl_s=TTL_S,
        targets={r.name: f"{r.name}.lb.example.net" for r in cfg.regions},
        propagation_timeout_s=propagation_timeout_s,
    )
    return cfg.model_copy(
        update={
            "traffic": cfg.traffic.model_copy(update={"global_tier": tier}),
            "aws": cfg.aws.model_copy(update={"endpoint_url": endpoint_url}),
        }
    )


@pytest.fixture
def zone(fleet_config: FleetConfig, dev_stack: object) -> Iterator[tuple[str, str]]:
    """A fresh hosted zone in the dev stack's moto, holding the configured weights: (name, id)."""
    client = aws_client("route53", fleet_config.aws.endpoint_url, key="testing")
    name = f"r{uuid.uuid4().hex[:8]}.example.com"
    zid = client.create_hosted_zone(Name=name, CallerReference=name)["HostedZone"]["Id"].removeprefix(
        "/hostedzone/"
    )
    direct = with_route53(fleet_config, fleet_config.aws.endpoint_url or "", zid, name, 60)
    Route53GlobalTraffic.from_config(direct).set_weights(fleet_config.weights)  # moto: INSYNC at once
    yield name, zid


def follow_dns(fleet_config: FleetConfig, standin: Route53StandIn, zone_id: str, zone: str) -> None:
    """When a change becomes visible, move the emulated clients (the global HAProxy) to its weights."""
    records = Route53GlobalTraffic.from_config(
        with_route53(fleet_config, fleet_config.aws.endpoint_url or "", zone_id, zone, 60)
    )
    clients = HAProxyGlobalTraffic.from_config(fleet_config)
    standin.on_visible = lambda _change: clients.set_weights(records.get_weights())


async def activity_attempts(handle: WorkflowHandle, name: str) -> list[int]:
    """The attempt number each scheduled `name` activity started with, last attempt per activity."""
    scheduled: dict[int, str] = {}
    attempts: list[int] = []
    async for e in handle.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            a = e.activity_task_started_event_attributes
            if scheduled.get(a.scheduled_event_id) == name:
                attempts.append(a.attempt)
    return attempts


async def test_failover_and_failback_while_route53_answers_pending(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig, zone: tuple[str, str]
) -> None:
    name, zid = zone
    with Route53StandIn(
        fleet_config.aws.endpoint_url or "", pending_s=PENDING_S, visible_after_s=2
    ) as standin:
        follow_dns(fleet_config, standin, zid, name)
        cfg = await start_workers(cfg=with_route53(fast_config(fleet_config), standin.url, zid, name, 60))
        spec = FleetSpec.from_config(cfg)
        assert spec.verify_deadline_s == cfg.failover.verify_timeout_s + TTL_S
        handle = await start_failover(temporal_client, cfg, spec=spec)
        res = await asyncio.wait_for(handle.result(), 135 + PENDING_S)
        assert res.status == "succeeded", res.error
        assert res.compensated is None and res.error is None
        assert res.weights_after == {"us-west-1": 0, "us-east-1": 100}
        assert (
            res.weights_applied_at is not None
            and res.propagated_at is not None
            and res.verified_at is not None
        )
        # Verified while Route 53 still said PENDING; the INSYNC came later and was recorded.
        assert res.weights_applied_at < res.verified_at < res.propagated_at
        assert (res.propagated_at - res.weights_applied_at).total_seconds() >= PENDING_S - 3
        # DNS honesty: clients have all moved only a TTL after the change is in effect everywhere.
        assert res.rto_s is not None and res.rto_clients_bound_s == round(
            (res.propagated_at - res.fault_at).total_seconds() + TTL_S, 3
        )
        assert [c.propagation for c in res.changes] == ["insync"]
        assert "propagate" in [p.phase for p in res.phases]
        # No retry storm: one change batch, one attempt, GetChange every ~2 s.
        assert standin.calls["ChangeResourceRecordSets"] == 1
        assert await activity_attempts(handle, "set_global_weights") == [1]
        assert await activity_attempts(handle, "wait_global_propagation") == [1]
        assert PENDING_S / 5 <= standin.calls["GetChange"] <= PENDING_S / 2 + 5
        assert await served_by(cfg) == {"us-east-1": 20}

        # Failback: each step waits for INSYNC before its analysis and the next change.
        standin.pending_s = 3
        back = await start_operation(
            temporal_client,
            cfg,
            Failback.run,
            FailbackInput(spec=spec, stabilization_window_s=0),
            operation="failback",
            workflow_id=f"failback/{cfg.name}",
        )
        fb = await asyncio.wait_for(back.result(), 120)
        assert fb.status == "succeeded", fb.error
        assert fb.weights_after == cfg.weights
        assert len(fb.changes) == fb.steps_done == 2
        for c in fb.changes:
            assert c.propagation == "insync" and c.propagated_at is not None
            assert (c.propagated_at - c.applied_at).total_seconds() >= 2
        assert standin.calls["ChangeResourceRecordSets"] == 3


async def test_throttled_and_never_insync_change_still_fails_over_without_compensation(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig, zone: tuple[str, str]
) -> None:
    name, zid = zone
    with Route53StandIn(fleet_config.aws.endpoint_url or "", pending_s=3600, visible_after_s=1) as standin:
        follow_dns(fleet_config, standin, zid, name)
        standin.inject("ChangeResourceRecordSets", "Throttling", "PriorRequestNotComplete")
        cfg = await start_workers(cfg=with_route53(fast_config(fleet_config), standin.url, zid, name, 5))
        handle = await start_failover(temporal_client, cfg)
        res = await asyncio.wait_for(handle.result(), 150)
    assert res.status == "succeeded", res.error
    assert res.compensated is None
    assert res.weights_applied_at is not None and res.propagated_at is None
    [change] = res.changes
    assert change.propagation == "pending" and change.note and "PENDING" in change.note
    # Two refusals retried with backoff by the activity, then one accepted batch: three requests in all.
    assert standin.calls["ChangeResourceRecordSets"] == 3
    assert await activity_attempts(handle, "set_global_weights") == [3]


async def test_failed_verification_compensates_and_records_both_changes(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig, zone: tuple[str, str]
) -> None:
    """Clients never see the shift (no follow_dns): verification fails, and the restore is recorded like the shift."""
    name, zid = zone
    with Route53StandIn(fleet_config.aws.endpoint_url or "", pending_s=3600) as standin:
        cfg = await start_workers(cfg=with_route53(fast_config(fleet_config), standin.url, zid, name, 60))
        handle = await start_failover(temporal_client, cfg)
        await _shift_applied(standin, handle)
        standin.pending_s = 3  # the restore propagates in 3 s; the shift stays PENDING
        res = await asyncio.wait_for(result_of(handle, FailoverResult), 150)
    assert res.status == "failed" and res.error and "verification failed" in res.error
    assert res.compensated == "restored_weights"
    assert res.weights_after == cfg.weights
    shift, restore = res.changes
    # The shift's wait was still running: abandoned, said so, never waited out its 60 s deadline.
    assert shift.propagation == "unknown" and shift.note and "compensated" in shift.note
    assert res.propagated_at is None
    assert restore.propagation == "insync" and restore.propagated_at is not None
    assert (restore.propagated_at - restore.applied_at).total_seconds() >= 2
    assert standin.calls["ChangeResourceRecordSets"] == 2
    assert await activity_attempts(handle, "set_global_weights") == [1, 1]


async def _changes(standin: Route53StandIn, n: int) -> bool:
    return standin.calls["ChangeResourceRecordSets"] >= n


async def _shift_applied(standin: Route53StandIn, handle: WorkflowHandle[Any, Any]) -> None:
    """Until the failover's shift reaches Route 53; a failover that ended first fails the test with
    its own result (CI once saw one refused before any shift), not 90 s later with no cause."""

    async def shifted() -> bool:
        if await _changes(standin, 1):
            return True
        if (await handle.describe()).status is not WorkflowExecutionStatus.RUNNING:
            res = await result_of(handle, FailoverResult)
            raise RuntimeError(f"the failover ended before its shift: {res.status}: {res.error}")
        return False

    await assert_eventually(shifted, timeout_s=90, interval_s=0.2, what="the shift applied")


@contextlib.asynccontextmanager
async def _shifted(
    start_workers: StartWorkers, client: Client, fleet_config: FleetConfig, zone: tuple[str, str]
) -> AsyncIterator[tuple[Route53StandIn, FleetConfig, WorkflowHandle[Any, Any]]]:
    """A failover to us-east-1 through a stand-in that never reports INSYNC, once its shift is applied."""
    name, zid = zone
    with Route53StandIn(fleet_config.aws.endpoint_url or "", pending_s=3600) as standin:
        cfg = await start_workers(
            cfg=_short_verify(with_route53(fast_config(fleet_config), standin.url, zid, name, 60))
        )
        handle = await start_failover(client, cfg)
        await _shift_applied(standin, handle)
        yield standin, cfg, handle


def _record_weights(fleet_config: FleetConfig, zone: tuple[str, str]) -> dict[str, int]:
    """The weights in the zone's records, read from moto past the stand-in."""
    name, zid = zone
    endpoint = fleet_config.aws.endpoint_url or ""
    return Route53GlobalTraffic.from_config(with_route53(fleet_config, endpoint, zid, name, 60)).get_weights()


async def test_failed_compensation_is_reported_with_the_weights_it_left(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig, zone: tuple[str, str]
) -> None:
    """Verification fails, then Route 53 refuses the restore (AccessDenied): the result says so, never a crash."""
    async with _shifted(start_workers, temporal_client, fleet_config, zone) as (standin, cfg, handle):
        standin.inject("ChangeResourceRecordSets", "AccessDenied")
        res = await asyncio.wait_for(result_of(handle, FailoverResult), 150)
    assert res.status == "failed" and res.compensated == "compensation_failed", res
    assert res.error and "verification failed" in res.error and "compensation failed" in res.error, res.error
    assert "AccessDenied" in res.error or "Forbidden" in res.error, res.error
    # Traffic is where the shift left it, and the result says exactly that.
    assert res.weights_after == {"us-west-1": 0, "us-east-1": 100}
    assert "weights left at us-west-1 0 / us-east-1 100" in res.error, res.error
    assert _record_weights(fleet_config, zone) == {"us-west-1": 0, "us-east-1": 100}
    assert [p.phase for p in res.phases][-1] == "compensate"
    assert await activity_attempts(handle, "set_global_weights") == [1, 1]  # Forbidden is not retried
    # Failed in the UI with the whole result (read above), and the fleet released: the lock, held by
    # nobody, ends.
    assert (await handle.describe()).status is WorkflowExecutionStatus.FAILED

    async def lock_ended() -> bool:
        return (
            await temporal_client.get_workflow_handle(f"lock/{cfg.name}").describe()
        ).status is not WorkflowExecutionStatus.RUNNING

    await assert_eventually(lock_ended, timeout_s=30, interval_s=0.3, what="the fleet lock released")


async def test_compensation_leaves_traffic_on_the_target_when_the_source_is_down(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig, zone: tuple[str, str]
) -> None:
    """Verification fails, but moving traffic back to a dead source would make things worse: it stays."""
    async with _shifted(start_workers, temporal_client, fleet_config, zone) as (standin, cfg, handle):
        kill_stable(cfg, "us-west-1")
        res = await asyncio.wait_for(result_of(handle, FailoverResult), 150)
    assert res.status == "failed" and res.compensated == "left_on_target_source_dead", res
    assert res.weights_after == {"us-west-1": 0, "us-east-1": 100}
    assert _record_weights(fleet_config, zone) == {"us-west-1": 0, "us-east-1": 100}
    assert standin.calls["ChangeResourceRecordSets"] == 1  # no restore was even tried


def _short_verify(cfg: FleetConfig) -> FleetConfig:
    """Verification that is meant to fail gives up after 3 s (+ the TTL) rather than 10."""
    return tuned(cfg, "failover", verify_timeout_s=3.0)
