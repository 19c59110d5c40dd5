"""The monitor's tier watch: notices weights it did not set and regions the data plane took out.

A task of the FleetMonitor, whatever `failover.rebalance` says, behind `workflow.patched(PATCH)` so
histories recorded before it replay unchanged. It keeps one `watch_global_tier` activity running
(activities/tier_watch.py), which returns only on a change, and for each change:
- a drctl operation's own move (the monitor's child, a rebalance step, or any mutating operation of
  the fleet the watch found running or just closed) is taken as the new baseline, silently;
- weights a break-glass failover set (its audit record found) are recorded with the record, imported,
  and adopted: never re-asserted, and no failback of the regions they drained (the monitor fails
  back only what its own failovers drained, docs/failover.md);
- other weights no operation set are drift. Drift that gives share to a region drctl had drained (a
  global tier restarted with its config weights, a hand edit undoing a failover) is put back to the
  weights last seen, through a Rebalance child (action reconcile: the fleet lock), when the monitor
  moves traffic by itself (policy automatic, rebalance automatic): a drained region comes back only
  through failback. Drift that only takes share away (an operator's hand drain) is adopted;
- a region the data plane took out of rotation (or put back), or the tier becoming unreadable, is
  recorded and notified.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    CancelledError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from drctl.models.monitor_decisions import Decision
    from drctl.models.rebalance import RebalanceInput
    from drctl.models.tier_watch import (
        RETURN_AFTER_S,
        TierSeen,
        TierWatchInput,
        TierWatchResult,
        describe,
    )
    from workflows import calls
    from workflows.monitor_actions import run_rebalance
    from workflows.monitor_run import MonitorRun
    from workflows.notify import Notifier

PATCH = "monitor-tier-watch"
MODE = "tier-watch"  # the decision log's mode for what the tier watch noticed
# After a watch failed (its worker gone past every retry), the next starts after this.
RETRY_S = 30.0


@dataclass
class MonitorTier:
    """The tier watch of the `MonitorRun`; `busy` says whether one of drctl's own moves is under
    way in this monitor (its child or a rebalance step); `details` is the monitor's own."""

    run: MonitorRun
    notes: Notifier
    details: Callable[[], None]
    busy: Callable[[], bool]
    task: asyncio.Task[None] | None = None
    handle: workflow.ActivityHandle[TierWatchResult] | None = None
    stopping: bool = False

    def ensure_started(self) -> None:
        if self.task is None and workflow.patched(PATCH):
            self.stopping = False
            self.task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        """Before continue-as-new: cancel the running watch; the next run starts another from the
        state's `tier_seen`, so nothing seen in between is lost."""
        if self.task is None:
            return
        self.stopping = True
        if self.handle is not None:
            self.handle.cancel()
        await self.task

    async def _loop(self) -> None:
        s = self.run.state
        try:
            while not self.stopping:
                # Cleared first: a child started while the watch ran must not be taken as a stranger.
                was_busy = self.busy()
                self.handle = calls.start_tier_watch(
                    TierWatchInput(
                        fleet=s.spec.fleet,
                        expected=s.tier_seen,
                        interval_s=s.spec.interval_s,
                        return_after_s=RETURN_AFTER_S,
                    ),
                    summary="watch the global tier for changes drctl did not make",
                )
                try:
                    res = await self.handle
                except ActivityError as exc:
                    if self.stopping or isinstance(exc.cause, CancelledError):
                        return
                    workflow.logger.warning("tier watch failed, again in %g s: %s", RETRY_S, exc.cause or exc)
                    await workflow.sleep(timedelta(seconds=RETRY_S))
                    continue
                finally:
                    self.handle = None
                before = s.tier_seen
                s.tier_seen = res.seen
                if res.changed and not await self.noticed(before, res, ours=was_busy or self.busy()):
                    # The drift is still there and not corrected: watch from before it, after a pause,
                    # so the next watch returns it again and the correction is tried again.
                    s.tier_seen = before
                    await workflow.sleep(timedelta(seconds=RETRY_S))
        finally:
            self.task = None

    async def noticed(self, before: TierSeen | None, res: TierWatchResult, ours: bool) -> bool:
        """Record what the watch found; weights set outside drctl with no break-glass record are put
        back when the monitor is automatic (policy and rebalance), else adopted as they are. The
        first reading is the baseline only. False: a correction was due and failed."""
        if before is None:
            return True
        s, now, seen = self.run.state, workflow.now(), res.seen
        weights_moved = (
            before.weights is not None and seen.weights is not None and before.weights != seen.weights
        )
        by = res.by_drctl if weights_moved else []
        lines = describe(before, seen)
        if weights_moved and (ours or by):
            # drctl's own move: the operation records it; only what the data plane did is news.
            lines = [x for x in lines if not x.startswith("weights in effect")]
        if not lines:
            return True
        reasons = list(lines)
        stranger = weights_moved and not ours and not by
        # Share given back outside drctl to a region drctl had drained (a global tier restarted with its
        # config weights, a hand edit undoing a failover): a region comes back only through failback,
        # with analysis at each step. Share taken away by hand is an operator's emergency move: kept.
        refilled = sorted(
            r for r, w in (seen.weights or {}).items() if w > 0 and (before.weights or {}).get(r, 0) == 0
        )
        correct = stranger and not res.breakglass and bool(refilled) and self._corrects()
        if stranger and res.breakglass:
            reasons.append(
                f"set outside drctl ({res.breakglass_line}): adopted as they are, not undone; audit record "
                f"{res.breakglass}" + (f"; imported as {res.imported}" if res.imported else "")
            )
        elif stranger:
            if correct:
                why = (
                    f"they give share to {', '.join(refilled)}, which drctl had drained: put back to the "
                    "weights drctl last saw (a drained region comes back only through failback)"
                )
            elif refilled:
                why = f"they give share to {', '.join(refilled)}, which drctl had drained, but {self._why_kept()}: kept"
            else:
                why = "they only take share away, as an operator's emergency move would: adopted as they are"
            reasons.append(f"set outside drctl (no drctl operation and no break-glass record); {why}")
        d = Decision(
            at=now,
            action="failover" if res.breakglass else ("reconcile" if correct else "hold"),
            mode="break-glass" if res.breakglass else MODE,
            outcome="recorded",
            # Adopted: from the weights before to those set; corrected: from the drift to those put back.
            weights_before=dict(before.weights or {})
            if stranger and not correct
            else dict(seen.weights or {}),
            weights_after=dict(before.weights or {}) if correct else dict(seen.weights or {}),
            reasons=reasons,
            held_back=[f"{r} out: {why}" for r, why in sorted(seen.out.items())],
            error=seen.error,
        )
        ok = True
        if correct:
            assert before.weights is not None and seen.weights is not None  # weights_moved
            ok = await self._correct(d, seen.weights, before.weights)
            if ok:
                s.tier_seen = seen.model_copy(update={"weights": dict(d.weights_after)})
        s.decisions.record(d)
        workflow.logger.info("tier watch: %s", d.line())
        self.notes.tier_changed(d)
        self.details()
        return ok

    def _corrects(self) -> bool:
        """Drift is put back only by a monitor that moves traffic by itself: policy automatic, not
        paused, rebalance automatic (advise notifies, off records)."""
        s = self.run.state
        return s.policy == "automatic" and not s.paused and s.spec.rebalance == "automatic"

    def _why_kept(self) -> str:
        s = self.run.state
        if s.policy != "automatic" or s.paused:
            return f"the monitor is {'paused' if s.paused else 'manual'}"
        return f"failover.rebalance is {s.spec.rebalance}"

    async def _correct(self, d: Decision, drifted: dict[str, int], want: dict[str, int]) -> bool:
        """Put `want` back through a Rebalance child (the fleet lock; stale if the weights moved again)."""
        spec = self.run.state.spec
        inp = RebalanceInput(
            spec=spec,
            action="reconcile",
            weights_before=dict(drifted),
            weights_after=dict(want),
            reason="weights set outside drctl put back",
        )
        try:
            res = await run_rebalance(inp, "reconcile: weights set outside drctl put back")
        except (WorkflowAlreadyStartedError, ChildWorkflowError) as exc:
            d.outcome, d.error = "failed", f"reconcile did not run: {exc}"
            return False
        d.weights_after = res.weights_after or d.weights_after
        if res.status == "succeeded":
            d.outcome = "applied"
            return True
        d.outcome, d.error = "failed", f"reconcile {res.status}: {res.error}"
        return res.status == "stale"  # moved again meanwhile: the next watch returns what is there now
