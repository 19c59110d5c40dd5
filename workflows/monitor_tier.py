"""The monitor's tier watch: notices weights it did not set and regions the data plane took out.

A task of the FleetMonitor, whatever `failover.rebalance` says, behind `workflow.patched(PATCH)` so
histories recorded before it replay unchanged. It keeps one `watch_global_tier` activity running
(activities/tier_watch.py), which returns only on a change, and for each change:
- a drctl operation's own move (the monitor's child, a rebalance step, or any mutating operation of
  the fleet the watch found running or just closed) is taken as the new baseline, silently;
- weights no operation set are recorded in the decision log, with the break-glass audit record when
  one set them, and adopted: never re-asserted, and no failback of the regions they drained (the
  monitor fails back only what its own failovers drained, docs/failover.md);
- a region the data plane took out of rotation (or put back), or the tier becoming unreadable, is
  recorded and notified.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from drctl.models.monitor_decisions import Decision
    from drctl.models.tier_watch import (
        RETURN_AFTER_S,
        TierSeen,
        TierWatchInput,
        TierWatchResult,
        describe,
    )
    from workflows import calls
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
                if res.changed:
                    self.noticed(s.tier_seen, res, ours=was_busy or self.busy())
                s.tier_seen = res.seen
        finally:
            self.task = None

    def noticed(self, before: TierSeen | None, res: TierWatchResult, ours: bool) -> None:
        """Record what the watch found, adopting weights as they are; the first reading is the baseline only."""
        if before is None:
            return
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
            return
        reasons = list(lines)
        stranger = weights_moved and not ours and not by
        if stranger:
            who = res.breakglass_line or "no drctl operation and no break-glass record"
            reasons.append(
                f"set outside drctl ({who}): adopted as they are, not undone"
                + (f"; audit record {res.breakglass}" if res.breakglass else "")
                + (f"; imported as {res.imported}" if res.imported else "")
            )
        d = Decision(
            at=now,
            action="failover" if res.breakglass else "hold",
            mode="break-glass" if res.breakglass else MODE,
            outcome="recorded",
            weights_before=dict(before.weights or {}) if stranger else dict(seen.weights or {}),
            weights_after=dict(seen.weights or {}),
            reasons=reasons,
            held_back=[f"{r} out: {why}" for r, why in sorted(seen.out.items())],
            error=seen.error,
        )
        s.decisions.record(d)
        workflow.logger.info("tier watch: %s", d.line())
        self.notes.tier_changed(d)
        self.details()
