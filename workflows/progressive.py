"""Operator control and step analysis shared by Upgrade and Migration (progressive delivery).

`Control` holds what the promote / abort / pause / resume / approve updates change; the workflows
delegate their handlers to it, so both behave alike under `drctl upgrade` and `drctl ops`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from drctl.models.analysis import AnalysisRequest, AnalysisResult, Verdict
    from drctl.models.upgrade import Outcome
    from workflows.common import QUEUE_WAIT_S, Phases

T = TypeVar("T")

# Analysis sends its own bounded traffic; a worker lost mid-window is retried a couple of times.
ANALYSIS_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)


class Stop(Exception):
    """Ends a wave: the workflow rolls the region back and reports why."""

    def __init__(self, outcome: Outcome, reason: str, metric: str | None = None) -> None:
        super().__init__(reason)
        self.outcome = outcome
        self.reason = reason
        self.metric = metric


def reason_of(exc: BaseException) -> str:
    """The innermost message: ActivityError wraps the ApplicationError the activity raised."""
    while isinstance(exc, (ActivityError, ChildWorkflowError)) and exc.cause is not None:
        exc = exc.cause
    return str(exc)


def error_type(exc: BaseException) -> str | None:
    while isinstance(exc, (ActivityError, ChildWorkflowError)) and exc.cause is not None:
        exc = exc.cause
    return exc.type if isinstance(exc, ApplicationError) else None


class Control:
    def __init__(self, phases: Phases) -> None:
        self.phases = phases
        self.abort_reason: str | None = None
        self.promote_requested = False
        self.paused = False
        self.pause_reason = ""
        self.approved_by: str | None = None
        self.finished = False
        # Set when a failover took the fleet: the operation stops at once, like an abort.
        self.preempted: str | None = None

    # --- what the update handlers call (validators raise ValueError) ----------------------------

    def check_running(self) -> None:
        if self.finished:
            raise ValueError(f"the {self.phases.operation} has already finished ({self.phases.phase})")

    def pause(self, reason: str) -> None:
        self.paused, self.pause_reason = True, reason

    def resume(self) -> None:
        self.paused, self.pause_reason = False, ""

    def preempt(self, reason: str) -> None:
        """A failover takes the fleet: stop at the next await, paused or not, and say why."""
        self.preempted = reason
        self.abort_reason = self.abort_reason or reason

    # --- waiting --------------------------------------------------------------------------------

    def check_abort(self) -> None:
        if self.preempted is not None:
            raise Stop(Outcome.PREEMPTED, f"yielded: {self.preempted}")
        if self.abort_reason is not None:
            raise Stop(Outcome.ABORTED, f"aborted: {self.abort_reason}")

    async def abortable(self, work: Awaitable[T]) -> T:
        """Run `work` (an activity) but give up on it as soon as an abort arrives."""
        task: asyncio.Future[T] = asyncio.ensure_future(work)
        stopper: asyncio.Future[Any] = asyncio.ensure_future(
            workflow.wait_condition(lambda: self.abort_reason is not None))
        waiters: list[asyncio.Future[Any]] = [task, stopper]
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            task.cancel()
            stopper.cancel()
            self.check_abort()
        stopper.cancel()
        return task.result()

    async def hold(self) -> None:
        """Wait while paused; abort and promote end the pause."""
        if not self.paused:
            return
        previous = self.phases.phase
        self.phases.enter("paused", f"paused: {self.pause_reason} — `drctl upgrade promote|abort` or resume")
        await workflow.wait_condition(
            lambda: not self.paused or self.abort_reason is not None or self.promote_requested
        )
        self.paused = False
        self.check_abort()
        self.phases.enter(previous, "resumed")

    async def approval(self, what: str, timeout_s: float) -> None:
        self.approved_by = None
        self.phases.awaiting_approval = True
        self.phases.enter("awaiting-approval", f"waiting for `drctl ops approve` before {what}")
        try:
            await workflow.wait_condition(
                lambda: self.approved_by is not None or self.abort_reason is not None,
                timeout=timedelta(seconds=timeout_s),
            )
        except TimeoutError:
            self.abort_reason = f"no approval within {timeout_s:g} s"
        finally:
            self.phases.awaiting_approval = False
        self.check_abort()

    async def analyse(
        self, req: AnalysisRequest, queue: str, max_inconclusive: int, history: list[AnalysisResult]
    ) -> AnalysisResult | None:
        """Analyse until PASS; FAIL raises Stop(ROLLED_BACK). Inconclusive windows are repeated and,
        after `max_inconclusive` in a row, pause for an operator instead of passing.

        Returns None when an operator promoted during the analysis (the step is skipped).
        """
        inconclusive = 0
        while True:
            await self.hold()
            if self.promote_requested:
                return None
            opts: dict[str, Any] = {
                "task_queue": queue,
                "start_to_close_timeout": timedelta(seconds=req.window_s + 60),
                "schedule_to_start_timeout": timedelta(seconds=QUEUE_WAIT_S),
                "heartbeat_timeout": timedelta(seconds=30),
                "retry_policy": ANALYSIS_RETRY,
            }
            result: AnalysisResult = await self.abortable(workflow.execute_activity(
                "analyze_tracks", req, result_type=AnalysisResult,
                summary=f"analyse {req.candidate} vs {req.baseline} for {req.window_s:g}s", **opts,
            ))
            history.append(result)
            self.phases.note("last analysis", f"{result.verdict.value}: {result.reason}")
            if result.verdict is Verdict.PASS:
                return result
            if result.verdict is Verdict.FAIL:
                raise Stop(Outcome.ROLLED_BACK, f"analysis failed: {result.reason}", result.failed_metric)
            inconclusive += 1
            if inconclusive >= max_inconclusive:
                self.pause(f"{inconclusive} inconclusive analyses: {result.reason}")
                inconclusive = 0
