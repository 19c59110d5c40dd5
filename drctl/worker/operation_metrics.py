"""Scrape-time reads of what no activity observes: idle region queues, approvals left waiting,
drill schedules that stopped, and the results of finished maintenance operations.

Each function reads Temporal (never workflow code, so nothing double-counts on replay) and sets
its gauges from scratch, so a figure never outlives what it describes. Results come from
visibility, so they survive a worker restart like the reader's other history figures.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from drctl.config.schema import FleetConfig
from drctl.models import search_attributes as sa
from drctl.models.drill import drill_schedule_id
from drctl.models.phases import PHASE_AWAITING_APPROVAL, QUERY_PROGRESS, OperationInfo, OperationProgress
from drctl.telemetry import metrics

# A poller counts while it polled within this window; Temporal keeps dead pollers listed for minutes.
POLLER_FRESH_S = 120.0
# The operations whose results are read from visibility (failover and failback count in activities).
RESULT_OPERATIONS = ("upgrade", "migrate", "restore", "drill")
RESULTS_LOOKBACK = timedelta(days=30)


async def read_pollers(client: Client, cfg: FleetConfig) -> None:
    """Live pollers of each region's activity queue (describe_task_queue)."""
    now = datetime.now(UTC)
    for region in cfg.regions:
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=region.queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            )
        )
        live = [
            p
            for p in resp.pollers
            if (now - p.last_access_time.ToDatetime(tzinfo=UTC)).total_seconds() <= POLLER_FRESH_S
        ]
        metrics.QUEUE_POLLERS.labels(fleet=cfg.name, region=region.name, task_queue=region.queue).set(
            len(live)
        )


async def read_approvals(client: Client, cfg: FleetConfig, ops: list[OperationInfo]) -> None:
    """When each running operation waiting for approval entered that phase (its `progress` query)."""
    metrics.APPROVAL_PENDING.clear()
    for op in ops:
        if op.phase != PHASE_AWAITING_APPROVAL:
            continue
        progress = await client.get_workflow_handle(op.workflow_id).query(
            QUERY_PROGRESS, result_type=OperationProgress
        )
        entered = [
            p.started_at for p in progress.phases if p.phase == PHASE_AWAITING_APPROVAL and not p.ended_at
        ]
        since = max(entered) if entered else op.start_time
        if progress.awaiting_approval and since is not None:
            metrics.APPROVAL_PENDING.labels(
                fleet=cfg.name, operation=op.operation, workflow_id=op.workflow_id
            ).set(since.timestamp())


async def read_schedules(client: Client, cfg: FleetConfig) -> None:
    """Each drill schedule's latest run (or its creation) and whether it is paused."""
    prefix = drill_schedule_id(cfg.name, "")
    seen: set[str] = set()
    async for entry in await client.list_schedules():
        if not entry.id.startswith(prefix):
            continue
        try:
            desc = await client.get_schedule_handle(entry.id).describe()
        except RPCError as exc:
            # The list is visibility, eventually consistent: a schedule deleted a moment ago may still
            # be listed. It is gone, so it is no longer expected to run (its gauges go below).
            if exc.status == RPCStatusCode.NOT_FOUND:
                continue
            raise
        name = entry.id[len(prefix) :]
        seen.add(name)
        runs = [a.started_at for a in desc.info.recent_actions]
        last = max(runs) if runs else desc.info.created_at
        if last is not None:
            metrics.DRILL_SCHEDULE_LAST_ACTION.labels(fleet=cfg.name, schedule=name).set(last.timestamp())
        paused = 1 if desc.schedule.state.paused else 0
        metrics.DRILL_SCHEDULE_PAUSED.labels(fleet=cfg.name, schedule=name).set(paused)
    for gauge in (metrics.DRILL_SCHEDULE_LAST_ACTION, metrics.DRILL_SCHEDULE_PAUSED):
        for labels in [k for k in gauge._metrics if k[0] == cfg.name and k[1] not in seen]:  # noqa: SLF001
            gauge.remove(*labels)  # a deleted schedule is no longer expected to run


async def read_results(client: Client, cfg: FleetConfig, limit: int = 200) -> None:
    """The newest close time per (operation, result) of finished maintenance operations and drills.

    The result is the operation's DrctlVerdict (SUCCEEDED, ROLLED_BACK, PASS, FAILED...), or its
    Temporal status when it ended without one (TERMINATED, TIMED_OUT).
    """
    since = (datetime.now(UTC) - RESULTS_LOOKBACK).strftime("%Y-%m-%dT%H:%M:%SZ")
    ops = ", ".join(f"'{o}'" for o in RESULT_OPERATIONS)
    query = (
        f"DrctlFleet = '{cfg.name}' AND DrctlOperation IN ({ops}) "
        f"AND ExecutionStatus != 'Running' AND CloseTime > '{since}'"
    )
    newest: dict[tuple[str, str], float] = {}
    async for ex in client.list_workflows(query, limit=limit):
        attrs = ex.typed_search_attributes
        operation = attrs.get(sa.OPERATION)
        if operation is None or ex.close_time is None:
            continue
        result = attrs.get(sa.VERDICT) or (ex.status.name if ex.status else "UNKNOWN")
        key = (operation, result)
        newest[key] = max(newest.get(key, 0.0), ex.close_time.timestamp())
    for (operation, result), ts in newest.items():
        metrics.OPERATION_RESULT.labels(fleet=cfg.name, operation=operation, result=result).set(ts)
