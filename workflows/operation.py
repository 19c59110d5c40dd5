"""`Operation`: the base of every mutating workflow (failover, failback, upgrade, migrate, drill,
backup, restore), so each one is only its phases.

It owns what they share:
- the `progress` query, and the `abort` update with its validator; an operation says when an abort
  is refused (`abort_refused`) and what one does (`on_abort`, `abort_error`);
- the `approve` and `reject` updates and `await_approval(...)`, the gate they answer
  (`approve_refused` per operation; `FOUR_EYES`: the initiator may not approve), which notifies the
  webhooks when it opens and again before it times out (`workflows.approval`);
- `initiator()`: who started the operation (its DrctlInitiator search attribute);
- `claim(fleet)` / `release()`: the fleet lock (`workflows.lock`), with `busy` set on refusal;
- `conclude(phases, failure)`: runs the phases, gives the lock back whatever happens, and ends the
  workflow with its result, or Failed carrying it (red in the UI, printed by `drctl`);
- `abortable(call)`: await an activity, but give it up as soon as an abort arrives;
- `finish(verdict, details, ok=...)`: final phase, verdict search attribute, memo, current details,
  then waits for `workflow.all_handlers_finished`;
- `cause_of(exc)`: the message of the error behind an activity or child failure.

A complete toy operation is `Toy` in tests/workflows/test_operation_base.py: a subclass sets
`OPERATION` and `TITLE`, its `@workflow.run` returns `await self.conclude(self._phases(...), failure)`,
and its phases catch `Aborted` to `finish` with their own verdict (an abort never fails the task).
The test runs it against a real server, so the example cannot drift from the base.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, ClassVar, TypeVar

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    TimeoutType,
)
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from drctl.models import phases
    from drctl.models import search_attributes as sa
    from drctl.models.lock import LockGrant
    from drctl.models.outcome import error_type, failed
    from drctl.models.phases import AbortInput, ApproveInput, OperationProgress, RejectInput, same_identity
    from workflows.approval import ApprovalReminder
    from workflows.calls import QUEUE_WAIT_S
    from workflows.common import Phases
    from workflows.lock import acquire_fleet, release_fleet

T = TypeVar("T")
R = TypeVar("R", bound=BaseModel)


class Aborted(Exception):
    """Raised at the next abort point once an abort was accepted (the default `abort_error`)."""


def innermost(exc: BaseException) -> BaseException:
    """The error an activity or child workflow raised: Temporal wraps it in ActivityError / ChildWorkflowError."""
    while isinstance(exc, (ActivityError, ChildWorkflowError)) and exc.cause is not None:
        exc = exc.cause
    return exc


def cause_of(exc: BaseException) -> str:
    """The message an operator should read for `exc`: the innermost error's."""
    return str(innermost(exc))


def is_busy(exc: BaseException) -> bool:
    return error_type(exc) == phases.FLEET_BUSY


def no_worker(exc: BaseException, queue: str) -> str | None:
    """The message for an activity no worker picked up from `queue`, else None.

    Callers pass the region queue: main-queue activities are served by the same workers that run
    the workflow itself, so while a workflow runs only a region queue can go unserved.
    """
    cause = exc.cause if isinstance(exc, ActivityError) else None
    if isinstance(cause, ActivityTimeout) and cause.type is TimeoutType.SCHEDULE_TO_START:
        name = exc.activity_type if isinstance(exc, ActivityError) else "activity"
        return (
            f"no worker picked up {name} from task queue {queue!r} within {QUEUE_WAIT_S:g} s: "
            "is the worker serving that queue running (`drctl worker --region R`)?"
        )
    return None


class Operation:
    """Subclass, set OPERATION and TITLE, decorate with `workflow.defn`, write `run` as phases."""

    OPERATION: ClassVar[str]
    TITLE: ClassVar[str]
    # Four eyes: the identity that started the operation may not approve it (failover.require_approval).
    FOUR_EYES: ClassVar[bool] = False

    def __init__(self) -> None:
        self.phases = Phases(self.OPERATION, self.TITLE)
        self.abort_reason: str | None = None
        self.approved_by: str | None = None
        self.rejected_by: str | None = None
        self.finished = False
        # Set when the fleet lock refused us: the failure then says "busy" (exit 3), not "failed".
        self.busy = False
        self._locked: str | None = None

    # --- handlers ---------------------------------------------------------------------------------

    @workflow.query(name=phases.QUERY_PROGRESS)
    def progress(self) -> OperationProgress:
        return self.phases.progress()

    @workflow.update(name=phases.UPDATE_ABORT)
    def abort(self, inp: AbortInput) -> str:
        self.abort_reason = f"{inp.reason} (by {inp.by})"
        return self.on_abort()

    @abort.validator
    def _validate_abort(self, inp: AbortInput) -> None:
        # Rejected before anything is written to history: the operator sees why at once.
        why = self.abort_refused()
        if why:
            raise ValueError(why)

    @workflow.update(name=phases.UPDATE_APPROVE)
    def approve(self, inp: ApproveInput) -> str:
        self.approved_by = inp.approver
        self.phases.note("approved by", inp.approver + (f" ({inp.comment})" if inp.comment else ""))
        return f"approved by {inp.approver}"

    @approve.validator
    def _validate_approve(self, inp: ApproveInput) -> None:
        # A refused approval (self-approval included) never reaches history as accepted.
        why = self.approve_refused() or self.approver_refused(inp.approver)
        if why:
            raise ValueError(why)

    @workflow.update(name=phases.UPDATE_REJECT)
    def reject(self, inp: RejectInput) -> str:
        self.rejected_by = inp.by
        self.abort_reason = f"rejected by {inp.by}: {inp.reason}"
        self.phases.note("rejected by", f"{inp.by} ({inp.reason})")
        return f"rejected by {inp.by}"

    @reject.validator
    def _validate_reject(self, inp: RejectInput) -> None:
        # Anyone may reject, the initiator too: that only stops the operation.
        why = self.approve_refused()
        if why:
            raise ValueError(why.replace("nothing to approve", "nothing to reject"))

    def approve_refused(self) -> str | None:
        """Why an approval is refused now, or None. Default: only while `await_approval` waits."""
        return None if self.phases.awaiting_approval else f"nothing to approve: phase {self.phases.phase}"

    def initiator(self) -> str | None:
        """Who started this operation (DrctlInitiator); None for one started before it was recorded."""
        return workflow.info().typed_search_attributes.get(sa.INITIATOR) or None

    def approver_refused(self, approver: str) -> str | None:
        """Four eyes: why `approver` may not approve, or None."""
        by = self.initiator()
        if self.FOUR_EYES and by and same_identity(approver, by):
            return (
                f"four eyes: {approver} started this {self.OPERATION}, so another identity must approve it "
                f"(`drctl ops reject {workflow.info().workflow_id}` stops it)"
            )
        return None

    # --- per-operation abort hooks ----------------------------------------------------------------

    def abort_refused(self) -> str | None:
        """Why an abort is refused now, or None to accept it. Default: refused once finished."""
        if self.finished:
            return f"the {self.OPERATION} has already finished ({self.phases.phase})"
        return None

    def on_abort(self) -> str:
        """What the abort does beyond recording its reason; returns the operator's answer."""
        return f"abort requested in phase {self.phases.phase}"

    def abort_error(self) -> Exception:
        """What an abort point raises once an abort was accepted."""
        return Aborted(self.abort_reason)

    def check_abort(self) -> None:
        if self.abort_reason is not None:
            raise self.abort_error()

    async def abortable(self, work: Awaitable[T]) -> T:
        """Await `work` (an activity), but cancel it and raise `abort_error()` once an abort arrives."""
        task: asyncio.Future[T] = asyncio.ensure_future(work)
        await workflow.wait_condition(lambda: task.done() or self.abort_reason is not None)
        if not task.done():
            task.cancel()
            raise self.abort_error()
        return task.result()

    async def await_approval(
        self, details: str, timeout_s: float, reminder: ApprovalReminder | None = None
    ) -> None:
        """Wait for the `approve` update (the operation's own handler sets `approved_by`), `reject`
        or an abort; no approval in time is an abort. `reminder`: notify the webhooks as the gate
        opens and again before it times out."""
        self.phases.awaiting_approval = True
        self.phases.enter(phases.PHASE_AWAITING_APPROVAL, details)
        answered = lambda: self.approved_by is not None or self.abort_reason is not None  # noqa: E731
        try:
            if reminder is not None and reminder.on():
                await reminder.wait(answered, timeout_s, self.initiator())
            else:
                await workflow.wait_condition(answered, timeout=timedelta(seconds=timeout_s))
        except TimeoutError:
            self.abort_reason = f"no approval within {timeout_s:g} s"
        finally:
            self.phases.awaiting_approval = False
        self.check_abort()

    # --- the fleet lock ---------------------------------------------------------------------------

    async def claim(self, fleet: str) -> LockGrant:
        """Take the fleet's lock (phase `claim`); a refusal raises FleetBusy and sets `busy`."""
        self.phases.enter(phases.PHASE_CLAIM, f"taking the lock of fleet {fleet}")
        try:
            grant = await acquire_fleet(fleet, self.OPERATION)
        except (ActivityError, ApplicationError) as exc:
            self.busy = is_busy(exc)
            raise
        self._locked = fleet
        return grant

    async def release(self) -> None:
        """Give the lock back if we hold it; call in a `finally`."""
        if self._locked is not None:
            fleet, self._locked = self._locked, None
            await release_fleet(fleet)

    async def conclude(
        self,
        phases: Awaitable[R],
        failure: Callable[[R], str | None],
        after: Callable[[R], Awaitable[None]] | None = None,
    ) -> R:
        """Run the operation's phases, give the lock back whatever happens, then end with the result.

        `failure` says why a result is a failure (None: it is not); the workflow then ends Failed,
        red in the UI, carrying the result for `drctl` to print. `after` runs once the lock is
        back and before the end (the failover's notifications and outcome metric).
        """
        try:
            res = await phases
        finally:
            await self.release()
        if after is not None:
            await after(res)
        why = failure(res)
        if why is not None:
            raise failed(why, res, busy=self.busy)
        return res

    # --- the end ----------------------------------------------------------------------------------

    async def finish(
        self, verdict: str, details: str, *, ok: bool, memo: dict[str, Any] | None = None
    ) -> None:
        """Record the outcome where operators look (phase, DrctlVerdict, memo, UI details), then let
        any update still running end before the workflow does."""
        self.finished = True
        self.phases.finish(phases.PHASE_DONE if ok else phases.PHASE_FAILED, details)
        workflow.upsert_search_attributes([sa.VERDICT.value_set(verdict)])
        if memo is not None:
            workflow.upsert_memo(memo)
        await workflow.wait_condition(workflow.all_handlers_finished)
