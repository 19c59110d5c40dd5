"""Operator control and step analysis shared by Upgrade and Migration (progressive delivery).

`Control` holds what the promote / abort / pause / resume / approve updates change; the workflows
delegate their handlers to it, so both behave alike under `drctl upgrade` and `drctl ops`.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from drctl.models.analysis import LATENCY_METRICS, AnalysisRequest, AnalysisResult, Verdict
    from drctl.models.lock import SIGNAL_PREEMPT, PreemptNotice
    from drctl.models.upgrade import Outcome
    from workflows import calls
    from workflows.operation import Operation

T = TypeVar("T")

# A latency FAIL is measured again before it rolls back; histories from before replay without it.
LATENCY_CONFIRM_PATCH = "analysis-confirm-latency"


class Stop(Exception):
    """Ends a wave: the workflow rolls the region back and reports why."""

    def __init__(self, outcome: Outcome, reason: str, metric: str | None = None) -> None:
        super().__init__(reason)
        self.outcome = outcome
        self.reason = reason
        self.metric = metric


class Control:
    """Promote, pause, approval and preemption state on top of the operation's abort (`Operation`)."""

    def __init__(self, op: Operation) -> None:
        self.op = op
        self.phases = op.phases
        self.promote_requested = False
        self.paused = False
        self.pause_reason = ""
        # Set when a failover took the fleet: the operation stops at once, like an abort.
        self.preempted: str | None = None

    @property
    def abort_reason(self) -> str | None:
        return self.op.abort_reason

    @abort_reason.setter
    def abort_reason(self, reason: str | None) -> None:
        self.op.abort_reason = reason

    @property
    def finished(self) -> bool:
        return self.op.finished

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

    def stop_error(self) -> Stop:
        """What an abort point raises: preempted by a failover, or aborted by an operator."""
        if self.preempted is not None:
            return Stop(Outcome.PREEMPTED, f"yielded: {self.preempted}")
        return Stop(Outcome.ABORTED, f"aborted: {self.abort_reason}")

    def check_abort(self) -> None:
        if self.preempted is not None or self.abort_reason is not None:
            raise self.stop_error()

    async def abortable(self, work: Awaitable[T]) -> T:
        """Run `work` (an activity) but give up on it as soon as an abort arrives."""
        return await self.op.abortable(work)

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

    async def analyse(
        self, req: AnalysisRequest, queue: str, max_inconclusive: int, history: list[AnalysisResult]
    ) -> AnalysisResult | None:
        """Analyse until PASS; FAIL raises Stop(ROLLED_BACK). Inconclusive windows are repeated and,
        after `max_inconclusive` in a row, pause for an operator instead of passing.

        An error-rate FAIL rolls back at once: waiting serves users more errors. A latency FAIL is
        confirmed by a second window first (Argo Rollouts' failureLimit of 1, for latency only):
        one window's p99 over a few dozen requests is its slowest request, and a scheduling stall
        on a replica's node must not roll a good release back. A real regression fails both.

        Returns None when an operator promoted during the analysis (the step is skipped).
        """
        inconclusive = 0
        latency_failed: AnalysisResult | None = None
        while True:
            await self.hold()
            if self.promote_requested:
                return None
            result = await self.abortable(
                calls.analyze_tracks(
                    req,
                    queue=queue,
                    summary=f"analyse {req.candidate} vs {req.baseline} for {req.window_s:g}s",
                )
            )
            history.append(result)
            self.phases.note("last analysis", f"{result.verdict.value}: {result.reason}")
            if result.verdict is Verdict.PASS:
                return result
            if result.verdict is Verdict.FAIL:
                if (
                    latency_failed is None
                    and result.failed_metric in LATENCY_METRICS
                    and workflow.patched(LATENCY_CONFIRM_PATCH)
                ):
                    latency_failed = result
                    self.phases.note("last analysis", f"FAIL, measuring again to confirm: {result.reason}")
                    continue
                confirmed = f" (and the window before: {latency_failed.reason})" if latency_failed else ""
                raise Stop(
                    Outcome.ROLLED_BACK, f"analysis failed: {result.reason}{confirmed}", result.failed_metric
                )
            inconclusive += 1
            if inconclusive >= max_inconclusive:
                self.pause(f"{inconclusive} inconclusive analyses: {result.reason}")
                inconclusive = 0


class Progressive(Operation):
    """An operation stepped under `Control` (upgrade, migration): its abort points raise Stop, and a
    failover preempts it."""

    def __init__(self) -> None:
        super().__init__()
        self.ctl = Control(self)

    def abort_error(self) -> Exception:
        return self.ctl.stop_error()

    @workflow.signal(name=SIGNAL_PREEMPT)
    def preempt(self, notice: PreemptNotice) -> None:
        # Sent by the fleet lock: a failover owns the global weights now, so this operation stops
        # (an upgrade rolls its current wave back, a migration yields).
        if not self.finished:
            self.ctl.preempt(notice.reason)
