"""The worker's scrape-time reads for the new alerts, against a real Temporal dev server: region
queue pollers, approvals left waiting, drill schedules and finished operations' results; and the
activity-side replication lag and the monitor's standing alert."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest_asyncio
from prometheus_client import REGISTRY
from temporalio import activity, workflow
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    ScheduleState,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from drctl.config.schema import FleetConfig
from drctl.models import search_attributes as sa
from drctl.models.phases import OperationInfo, OperationProgress, PhaseTiming
from drctl.models.rpo import LagReport, ReplicaPair
from drctl.telemetry import metrics
from drctl.worker import operation_metrics
from tests.support.temporal import start_local
from tests.support.wait import assert_eventually

WAITING_SINCE = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@workflow.defn(name="MetricsProbe", sandboxed=False)
class Probe:
    """Ends at once with a verdict, or waits for approval with a `progress` query like an Operation."""

    @workflow.run
    async def run(self, wait: bool) -> None:
        if wait:
            await workflow.wait_condition(lambda: False, timeout=timedelta(minutes=5))
        else:
            workflow.upsert_search_attributes([sa.VERDICT.value_set("ROLLED_BACK")])

    @workflow.query(name="progress")
    def progress(self) -> OperationProgress:
        timing = PhaseTiming(phase="awaiting-approval", started_at=WAITING_SINCE)
        return OperationProgress(
            operation="upgrade", phase="awaiting-approval", awaiting_approval=True, phases=[timing]
        )


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    async with await start_local(search_attributes=sa.ALL) as e:
        yield e


def _value(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def _fleet(cfg: FleetConfig) -> FleetConfig:
    tq = f"om-{uuid.uuid4().hex[:8]}"
    regions = [r.model_copy(update={"task_queue": f"{tq}-{r.name}"}) for r in cfg.regions]
    return cfg.model_copy(update={"name": tq, "regions": regions})


async def test_pollers_count_only_live_workers_of_each_region_queue(
    env: WorkflowEnvironment, fleet_config: FleetConfig
) -> None:
    cfg = _fleet(fleet_config)
    served, idle = cfg.regions
    async with Worker(env.client, task_queue=served.queue, activities=[_noop]):

        async def polled() -> bool:
            await operation_metrics.read_pollers(env.client, cfg)
            labels = {"fleet": cfg.name, "region": served.name, "task_queue": served.queue}
            assert _value("drctl_task_queue_pollers", **labels) == 1.0
            return True

        await assert_eventually(polled, timeout_s=20, interval_s=0.5, what="a poller on the served queue")
    idle_labels = {"fleet": cfg.name, "region": idle.name, "task_queue": idle.queue}
    assert _value("drctl_task_queue_pollers", **idle_labels) == 0.0


async def test_results_approvals_and_schedules(env: WorkflowEnvironment, fleet_config: FleetConfig) -> None:
    cfg = _fleet(fleet_config)
    client, tq = env.client, cfg.regions[0].queue
    attrs = TypedSearchAttributes(
        [SearchAttributePair(sa.FLEET, cfg.name), SearchAttributePair(sa.OPERATION, "upgrade")]
    )
    async with Worker(client, task_queue=tq, workflows=[Probe]):
        done = await client.start_workflow(
            Probe.run, False, id=f"upgrade/{cfg.name}/1", task_queue=tq, search_attributes=attrs
        )
        await done.result()
        waiting = await client.start_workflow(
            Probe.run, True, id=f"upgrade/{cfg.name}/2", task_queue=tq, search_attributes=attrs
        )

        async def result_read() -> bool:
            await operation_metrics.read_results(client, cfg)
            ts = _value(
                "drctl_operation_last_result_timestamp_seconds",
                fleet=cfg.name,
                operation="upgrade",
                result="ROLLED_BACK",
            )
            assert ts is not None and abs(ts - datetime.now(UTC).timestamp()) < 120
            return True

        await assert_eventually(result_read, timeout_s=20, interval_s=0.5, what="the verdict in visibility")

        op = OperationInfo(
            workflow_id=waiting.id, operation="upgrade", fleet=cfg.name, phase="awaiting-approval"
        )
        running = op.model_copy(update={"workflow_id": "other", "phase": "shift"})
        await operation_metrics.read_approvals(client, cfg, [op, running])
        labels = {"fleet": cfg.name, "operation": "upgrade", "workflow_id": waiting.id}
        assert _value("drctl_approval_pending_since_timestamp_seconds", **labels) == WAITING_SINCE.timestamp()
        await operation_metrics.read_approvals(client, cfg, [])
        assert _value("drctl_approval_pending_since_timestamp_seconds", **labels) is None
        await waiting.terminate("test done")

    sid = f"drill-schedule/{cfg.name}/weekly"
    handle = await client.create_schedule(
        sid,
        Schedule(
            action=ScheduleActionStartWorkflow(
                "MetricsProbe", False, id=f"drill/{cfg.name}/x", task_queue=tq
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(days=7))]),
            state=ScheduleState(paused=True),
        ),
    )
    labels = {"fleet": cfg.name, "schedule": "weekly"}

    async def schedule_read() -> bool:
        # Schedules are listed from visibility, which is eventually consistent: a schedule created a
        # moment ago may not be listed yet (the metrics loop reads again on its next pass).
        await operation_metrics.read_schedules(client, cfg)
        created = _value("drctl_drill_schedule_last_action_timestamp_seconds", **labels)
        assert created is not None and abs(created - datetime.now(UTC).timestamp()) < 120  # never ran
        return True

    try:
        await assert_eventually(
            schedule_read, timeout_s=20, interval_s=0.5, what="the schedule in visibility"
        )
        assert _value("drctl_drill_schedule_paused", **labels) == 1.0
    finally:
        await handle.delete()
    await operation_metrics.read_schedules(client, cfg)
    assert _value("drctl_drill_schedule_paused", fleet=cfg.name, schedule="weekly") is None


def test_replication_lag_per_bucket_and_replica_and_the_monitor_alert() -> None:
    now = datetime.now(UTC)
    rep = LagReport(bucket="models", source_region="us-west-1", replica_region="us-east-1", measured_at=now)
    labels = {
        "fleet": "lagtest",
        "bucket": "models",
        "source_region": "us-west-1",
        "replica_region": "us-east-1",
    }
    metrics.record_lag("lagtest", rep.model_copy(update={"lag_s": 12.5, "missing": 3}))
    assert _value("drctl_replication_lag_seconds", **labels) == 12.5
    assert _value("drctl_replication_objects_behind", **labels) == 3.0
    assert _value("drctl_replication_lag_measured_timestamp_seconds", **labels) == now.timestamp()
    later = rep.model_copy(update={"error": "source unreachable", "measured_at": now + timedelta(minutes=1)})
    metrics.record_lag("lagtest", later)
    assert _value("drctl_replication_lag_seconds", **labels) is None  # unknown is not an old figure
    # ... and a failed measurement is no measurement: the staleness alert keeps counting from `now`.
    assert _value("drctl_replication_lag_measured_timestamp_seconds", **labels) == now.timestamp()

    # A worker start counts as the last measurement of every configured replica, never moving one back.
    pair = ReplicaPair(
        bucket="models",
        source_region="us-west-1",
        source_bucket="m-west",
        replica_region="us-east-1",
        replica_bucket="m-east",
        interval_s=3600,
    )
    metrics.init_replicas("lagtest", [pair], now.timestamp() - 30)
    assert _value("drctl_replication_lag_measured_timestamp_seconds", **labels) == now.timestamp()
    assert _value("drctl_replication_interval_seconds", **labels) == 3600
    fresh = {**labels, "fleet": "lagfresh"}
    metrics.init_replicas("lagfresh", [pair], now.timestamp() - 30)
    assert _value("drctl_replication_lag_measured_timestamp_seconds", **fresh) == now.timestamp() - 30

    metrics.record_monitor_alert("alerttest", "NO_QUORUM")
    assert _value("drctl_monitor_alert", fleet="alerttest", alert="NO_QUORUM") == 1.0
    metrics.record_monitor_alert("alerttest", None)
    assert _value("drctl_monitor_alert", fleet="alerttest", alert="NO_QUORUM") is None


@activity.defn(name="metrics_noop")
async def _noop() -> None:
    return None
