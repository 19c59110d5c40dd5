"""The monitor with `health.watcher`: one watcher activity per quiet stretch instead of a round per probe.

The watcher (activities/watch.py) probes and reads passive signals itself and returns only when a
region changes state or its checkpoint is due. The monitor then applies the returned trackers and
decides exactly as after a round (the monitor's `_decide`, handed in as `decide`). Between returns
it wakes only for what it owns: a signal or update (pause and spec changes restart the watcher; a
policy change or a finished child is decided at once) and timed decisions (a failback window, a
failover back-off).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from drctl.models import search_attributes as sa
    from drctl.models.health import RegionState
    from drctl.models.monitor import PROBE_AUTH_REFUSED
    from drctl.models.quorum import NO_QUORUM
    from drctl.models.watch import WatchInput, WatchResult
    from workflows import calls
    from workflows.monitor_run import MonitorRun
    from workflows.notify import Notifier


@dataclass
class MonitorWatch:
    """Runs the watcher for the `MonitorRun`; `decide` and `details` are the monitor's own,
    `vote_due` the quorum's."""

    run: MonitorRun
    notes: Notifier
    decide: Callable[[], None]
    details: Callable[[], None]
    vote_due: Callable[[], list[datetime]]
    refused: list[str] = field(default_factory=list)  # regions refusing drctl's token, as last reported
    shown_phase: str | None = None  # the phase last upserted
    quiet_until: dict[str, datetime] = field(default_factory=dict)  # passive suspicion held off until

    def _due(self) -> list[datetime]:
        """Future moments at which `decide` may act without any region changing state."""
        s, now = self.run.state, workflow.now()
        due = [s.next_failover_attempt_at] if s.next_failover_attempt_at else []
        # A region UNHEALTHY without a quorum stays so: nothing else wakes the re-vote.
        due += self.vote_due()
        window = timedelta(seconds=s.spec.stabilization_window_s)
        for rec in s.failed_over:
            t = s.trackers.get(rec.source)
            if t is not None and t.state is RegionState.HEALTHY and t.since is not None:
                due.append(t.since + window)
        return [d for d in due if d > now]

    def _timeout(self) -> timedelta | None:
        due = self._due()
        return min(due) - workflow.now() if due else None

    async def cycle(self) -> None:
        """One watcher call, or one paused wait; returns when the loop should run its bookkeeping."""
        run, s = self.run, self.run.state
        spec = s.spec
        run.poke = False
        if s.paused:
            try:
                await workflow.wait_condition(
                    lambda: run.poke, timeout=timedelta(seconds=spec.watcher_checkpoint_s)
                )
            except TimeoutError:
                pass
            return
        inp = WatchInput.for_spec(
            spec,
            trackers=s.trackers,
            unresolved=s.unresolved,
            refused=self.refused,
            quiet_until=self.quiet_until,
        )
        handle = calls.start_watch(inp, summary="watch regions")
        try:
            while not handle.done():
                run.poke = False
                try:
                    await workflow.wait_condition(lambda: run.poke or handle.done(), timeout=self._timeout())
                except TimeoutError:
                    pass
                if handle.done():
                    break
                if s.paused or run.pending_spec is not None:
                    handle.cancel()  # the watcher restarts with the new spec, or stops while paused
                    await asyncio.gather(handle, return_exceptions=True)
                    return
                self.decide()  # a policy change, a finished child or a timed decision: no probe needed
                if self.refused and s.alert is None:
                    s.alert = PROBE_AUTH_REFUSED
                if NO_QUORUM in (s.alert, self.notes.alert):
                    # Raised or ended by a vote: no watcher return comes for it. Only this alert, so
                    # histories recorded before the quorum emit what they emitted.
                    self.notes.monitor_alert(s)
                self.show()
        except asyncio.CancelledError:
            handle.cancel()  # `drctl monitor stop`
            raise
        try:
            res = handle.result()
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                raise
            # Our own watcher failing says nothing about the regions: never fail over on it.
            workflow.logger.warning("watcher failed, regions unchanged: %s", exc.cause or exc)
            await workflow.sleep(spec.interval_s)
            return
        self._apply(res)

    def _apply(self, res: WatchResult) -> None:
        s = self.run.state
        # Regions removed by a spec update meanwhile are not brought back.
        s.trackers = {name: res.trackers.get(name, t) for name, t in s.trackers.items()}
        s.unresolved = {r: why for r, why in res.unresolved.items() if r in s.trackers}
        s.probe_rounds += res.rounds
        for name in res.changed:
            t = s.trackers.get(name)
            if t is not None:
                workflow.logger.info("region %s is now %s (%s)", name, t.state.value, t.last_reason)
        self.refused = res.refused
        # A probe just cleared a passive suspicion: the next call must not raise it again at once.
        self.quiet_until = {r: at for r, at in res.quiet_until.items() if at > workflow.now()}
        self.decide()
        if res.refused and s.alert is None:
            s.alert = PROBE_AUTH_REFUSED
            workflow.logger.error(
                "%s: %s refuse drctl's credentials (workload.auth); their health is unknown",
                PROBE_AUTH_REFUSED,
                ", ".join(res.refused),
            )
        self.notes.monitor_alert(s)

    def show(self) -> None:
        """The phase search attribute, upserted only when it changes (each upsert is a history event)."""
        s = self.run.state
        phase = s.alert or ("paused" if s.paused else "watching")
        if phase != self.shown_phase:
            workflow.upsert_search_attributes([sa.PHASE.value_set(phase)])
            self.shown_phase = phase
        self.details()
