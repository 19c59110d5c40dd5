"""The fleet lock's activities: `acquire_fleet` (update-with-start on `lock/<fleet>`),
and `lock_holders_closed` (the lock's liveness check)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.defined import activity_methods
from drctl.client.connection import ui_link
from drctl.client.operations import describe_or_none, list_operations, visibility_query
from drctl.config.schema import FleetConfig
from drctl.models import search_attributes as sa
from drctl.models.lock import (
    UPDATE_ACQUIRE,
    AliveInput,
    AliveResult,
    LockGrant,
    LockInput,
    LockRequest,
    lock_id,
)
from drctl.models.phases import OperationInfo


class OperationActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg

    def _client(self) -> Client:
        return activity.client()

    async def _running(self, fleet: str) -> list[OperationInfo]:
        return await list_operations(self._client(), fleet, visibility_query(fleet), self.cfg)

    async def _check_queue(self, wid: str, req: LockRequest) -> None:
        """A lock run on another task queue would never answer us: say so instead of hanging."""
        try:
            desc = await self._client().get_workflow_handle(wid).describe()
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return
            raise
        queue = self.cfg.temporal.task_queue
        if desc.status != WorkflowExecutionStatus.RUNNING or desc.task_queue == queue:
            return
        fleet = wid.removeprefix("lock/")
        running = [o for o in await self._running(fleet) if o.workflow_id != req.holder.workflow_id]
        if not running:
            # Left by workers of an older config (temporal.task_queue changed) and held by nobody
            # running: end it, and this request starts a new lock on our queue.
            activity.logger.warning("terminating %s on stale task queue %s", wid, desc.task_queue)
            await (
                self._client()
                .get_workflow_handle(wid)
                .terminate(f"stale: no worker serves {desc.task_queue}")
            )
            return
        raise ApplicationError(
            f"{wid} runs on task queue {desc.task_queue!r} but this worker serves {queue!r}, and "
            f"{', '.join(o.workflow_id for o in running)} still run: every worker of a fleet must share "
            "temporal.task_queue",
            type="LockQueueMismatch",
            non_retryable=True,
        )

    @activity.defn(name="acquire_fleet")
    async def acquire_fleet(self, req: LockRequest) -> LockGrant:
        """Ask `lock/<fleet>` for the fleet, starting the lock if no run is open.

        The update id is the holder's run, so a retried attempt is the same request to Temporal
        (and the lock answers a holder it already granted with a grant again).
        """
        wid = lock_id(req.fleet)
        await self._check_queue(wid, req)
        start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
            "FleetLock",
            LockInput(fleet=req.fleet),
            id=wid,
            task_queue=self.cfg.temporal.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(sa.FLEET, req.fleet), SearchAttributePair(sa.OPERATION, "lock")]
            ),
            static_summary=f"lock of fleet {req.fleet}",
        )
        grant: LockGrant = await self._client().execute_update_with_start_workflow(
            UPDATE_ACQUIRE,
            req,
            start_workflow_operation=start,
            result_type=LockGrant,
            id=f"acquire/{req.holder.workflow_id}/{req.holder.run_id}",
        )
        if grant.blocked_by is not None:
            grant.blocked_by_ui = ui_link(self.cfg, grant.blocked_by.workflow_id, grant.blocked_by.run_id)
        return grant

    @activity.defn(name="lock_holders_closed")
    async def holders_closed(self, inp: AliveInput) -> AliveResult:
        """Holders whose run is no longer open: they crashed or were terminated without releasing."""
        client = self._client()
        closed = []
        for h in inp.holders:
            desc = await describe_or_none(client.get_workflow_handle(h.workflow_id, run_id=h.run_id))
            if desc is None or desc.status != WorkflowExecutionStatus.RUNNING:
                closed.append(h)
        return AliveResult(closed=closed)


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(OperationActivities(cfg))
