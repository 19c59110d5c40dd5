"""The monitor's capacity- and SLO-aware traffic: a tick that reads every serving region's capacity
signals, asks the pure `decide_rebalance` for the decision, records it with its evidence, and applies it.

Runs beside the probe loop (or the watcher) as one more task of the FleetMonitor, behind
`workflow.patched("monitor-rebalance")` and only while `failover.rebalance` is not `off`, so
histories recorded before it replay unchanged. Each tick:
- reads `read_capacity_signals` on each serving region's own queue, in parallel and bounded: a
  region whose worker does not answer is evidence ("no answer from ..."), never a crash, and gets no
  share moved to or from it;
- passes the signals, the weights and the SUSPECT regions to `decide_rebalance`
  (drctl/models/rebalance_decision.py): the capacities, the breach windows, `plan_rebalance` and
  every rule that holds a step back by time are there, each with its unit test; this file judges
  nothing;
- `automatic`: applies a shed or return step as a `Rebalance` child (workflows/rebalance.py: the
  fleet lock, pre-scale, the global weights, analysis of a return step); `advise`: records it and
  notifies the webhooks, moving nothing;
- records the decision in the fleet's `DecisionLog` (on change, plus a periodic "held because").
A region that is down is the failover's (with the quorum, as before): the tick holds while a
failover or failback runs or while traffic is failed over. Ticks come every `health.interval_s`,
every second while a region breaches or a shed waits out its window.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    CancelledError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from drctl.models.capacity import RegionCapacity, RegionSignals
    from drctl.models.capacity_sample import CapacityReadInput
    from drctl.models.capacity_watch import CapacityWatchInput, CapacityWatchResult
    from drctl.models.health import RegionState
    from drctl.models.monitor_decisions import Decision, DecisionOutcome, DecisionsView
    from drctl.models.rebalance import RebalanceInput
    from drctl.models.rebalance_decision import (
        MIN_REQUESTS,
        RebalanceTick,
        after_step,
        capacity_spec,
        decide_rebalance,
        suspects_of,
    )
    from drctl.models.safe_text import safe_markdown
    from workflows import calls
    from workflows.common import DETAIL_CHARS
    from workflows.monitor_actions import run_rebalance
    from workflows.monitor_run import MonitorRun
    from workflows.notify import Notifier

PATCH = "monitor-rebalance"
# At rest, the ticks wait in `watch_capacity` activities instead (drctl/models/capacity_watch.py).
QUIET_PATCH = "monitor-rebalance-quiet"
# A rest ends with one ordinary tick at least this often, as the tier watch returns hourly: the
# decision log's "held because" is at most this old; nothing else at rest needs the tick.
REST_CHECKPOINT_S = 3600.0
FAST_TICK_S = 1.0
# Serving regions: SUSPECT is passive or first-probe evidence, not a confirmed outage, so it may shed.
_SERVING = (RegionState.HEALTHY, RegionState.SUSPECT)


@dataclass
class MonitorRebalance:
    """The rebalance ticks of the `MonitorRun`; `details` is the monitor's own (the UI details)."""

    run: MonitorRun
    notes: Notifier
    details: Callable[[], None]
    task: asyncio.Task[None] | None = None
    stopping: bool = False
    wake: bool = False
    urgent: bool = False  # tick fast: a breach or a pending shed is being timed
    suspects: frozenset[str] = frozenset()  # SUSPECT regions as last noted
    stepping: bool = False  # a Rebalance child (a step that moves weights) is running
    # The last tick found nothing to do or to time: the capacities it read (None: not at rest).
    at_rest: dict[str, RegionCapacity] | None = None
    due: datetime | None = None  # a step the last tick held back by time is due then

    # --- lifecycle --------------------------------------------------------------------------------

    def ensure_started(self) -> None:
        """Start the ticks when the spec asks for them (checked after every spec change)."""
        if self.task is None and self.run.state.spec.rebalance != "off" and workflow.patched(PATCH):
            self.stopping = False
            self.task = asyncio.ensure_future(self._loop())

    async def stop(self) -> None:
        """Before continue-as-new: let the running tick (and its step) end, start no other."""
        if self.task is not None:
            self.stopping, self.wake = True, True
            await self.task

    def poke(self) -> None:
        self.wake = True

    def note_states(self) -> None:
        """After the probe loop or the watcher decided: a region newly SUSPECT (passive or first-probe
        evidence) is read at once, not at the next tick: a gray failure starts losing share in seconds."""
        s = self.run.state
        now = frozenset(n for n, t in s.trackers.items() if t.state is RegionState.SUSPECT)
        if now - self.suspects:
            self.wake = True
        self.suspects = now

    async def _loop(self) -> None:
        try:
            while not self.stopping and self.run.state.spec.rebalance != "off":
                if not self.run.state.paused:
                    await self.tick()
                if self.at_rest and not self.stopping and workflow.patched(QUIET_PATCH):
                    await self._rest(self.at_rest)
                    continue
                period = FAST_TICK_S if self.urgent or self.suspects else self.run.state.spec.interval_s
                if self.due is not None:
                    # A step held back by time is due then: tick then, not a whole interval after it.
                    period = min(period, max(FAST_TICK_S, (self.due - workflow.now()).total_seconds()))
                self.wake = False
                try:
                    await workflow.wait_condition(
                        lambda: self.wake or self.stopping, timeout=timedelta(seconds=period)
                    )
                except TimeoutError:
                    pass
        finally:
            self.task = None

    # --- one tick ---------------------------------------------------------------------------------

    async def tick(self) -> None:
        s = self.run.state
        mem = s.rebalance_memory
        now = workflow.now()
        mem.ticks += 1
        self.urgent = False
        self.at_rest = None
        self.due = None
        held = self._held_by_others()
        if held is not None:
            self._record(
                Decision(at=now, action="hold", mode=s.spec.rebalance, outcome="held", reasons=[held])
            )
            return
        serving = [n for n, t in s.trackers.items() if t.state in _SERVING and n not in s.unresolved]
        # The weights and every region's signals at once: a gray failure's shed waits for the slowest only.
        weights = asyncio.ensure_future(self._weights())
        reads = await asyncio.gather(*(self._read(r) for r in serving))
        current, weights_error = await weights
        signals = {sig.region: sig for sig, _ in reads if sig is not None}
        missing = [why for sig, why in reads if sig is None and why]
        if current is None:
            self._record(
                Decision(
                    at=now,
                    action="hold",
                    mode=s.spec.rebalance,
                    outcome="held",
                    reasons=["global weights could not be read"],
                    error=weights_error,
                )
            )
            return
        await self._decide(current, signals, missing)

    async def _rest(self, caps: dict[str, RegionCapacity]) -> None:
        """At rest: one `watch_capacity` per region read, until one returns (a transition or its
        checkpoint), the monitor pokes (a region's state, a spec change, the tier watch) or stops."""
        s = self.run.state
        spec, mem = s.spec, s.rebalance_memory
        cap_spec = capacity_spec(spec)
        ceiling = max(mem.ceilings.values(), default=None)
        handles: dict[str, workflow.ActivityHandle[CapacityWatchResult]] = {}
        for r, c in caps.items():
            inp = CapacityWatchInput(
                region=r,
                previous=mem.samples.get(r),
                max_window_s=max(60.0, 3 * spec.interval_s),
                interval_s=spec.interval_s,
                return_after_s=REST_CHECKPOINT_S,
                spec=cap_spec,
                slo=spec.slo,
                min_requests=MIN_REQUESTS,
                ceiling=ceiling,
                ready_replicas=c.ready_replicas,
                desired_replicas=c.desired_replicas,
                known=c.known,
            )
            handles[r] = calls.start_capacity_watch(
                inp, queue=spec.region(r).queue, probe_timeout_s=spec.probe_timeout_s, summary=f"{r} at rest"
            )
        self.wake = False
        try:
            await workflow.wait_condition(
                lambda: self.wake or self.stopping or any(h.done() for h in handles.values()),
                timeout=timedelta(seconds=REST_CHECKPOINT_S + spec.interval_s + 60),
            )
        except TimeoutError:
            pass
        finally:
            # Only cancelled here: awaiting in a finally would fail while the worker evicts the run.
            for h in handles.values():
                if not h.done():
                    h.cancel()
        results = await asyncio.gather(*handles.values(), return_exceptions=True)
        for r, res in zip(handles, results, strict=True):
            if isinstance(res, CapacityWatchResult):
                if res.baseline is not None:
                    # The next tick's window starts where the watch's last one did: it still shows the breach.
                    mem.samples[r] = res.baseline
                if res.why:
                    workflow.logger.info("rebalance wakes: %s", "; ".join(res.why))

    async def _weights(self) -> tuple[dict[str, int] | None, str | None]:
        try:
            got = await calls.get_global_weights(summary="read global weights for the rebalance")
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                raise
            return None, str(exc.cause or exc)
        return got.weights, None

    def _held_by_others(self) -> str | None:
        s = self.run.state
        if self.run.child is not None:
            active = self.run.active
            return "a failover or failback started by the monitor is running" + (
                f" ({active.source} → {active.target})" if active else ""
            )
        if s.failed_over:
            return f"traffic is failed over from {', '.join(r.source for r in s.failed_over)}; the failback returns it"
        return None

    async def _read(self, region: str) -> tuple[RegionSignals | None, str | None]:
        s = self.run.state
        q = s.spec.region(region).queue
        try:
            out = await calls.read_capacity_signals(
                CapacityReadInput(
                    region=region,
                    previous=s.rebalance_memory.samples.get(region),
                    max_window_s=max(60.0, 3 * s.spec.interval_s),
                ),
                queue=q,
                probe_timeout_s=s.spec.probe_timeout_s,
                # A dead worker costs one tick, not the 30 s other calls may wait for one.
                queue_wait_s=s.spec.interval_s,
                summary=f"capacity signals of {region}",
            )
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                raise
            return None, f"{region}: no capacity signals from {q}: {exc.cause or exc}"
        s.rebalance_memory.samples[region] = out.sample
        return out.signals, None

    async def _decide(
        self, current: dict[str, int], signals: dict[str, RegionSignals], missing: list[str]
    ) -> None:
        """Ask `decide_rebalance` (pure, drctl/models/rebalance_decision.py), record, apply."""
        s = self.run.state
        spec = s.spec
        tick = RebalanceTick(
            current=current,
            signals=signals,
            suspects=suspects_of(s.trackers),
            missing=missing,
            votes={r: v.summary() for r, v in s.votes.items()},
        )
        verdict = decide_rebalance(tick, s.rebalance_memory, spec, workflow.now())
        s.rebalance_memory = verdict.memory
        d = verdict.decision
        self.urgent, self.due = verdict.urgent, verdict.due
        if d.action == "hold":
            self._record(d)
            if verdict.at_rest:
                self.at_rest = verdict.caps
            return
        if spec.rebalance == "advise":
            d.outcome = "advised"
            if self._record(d):
                self.notes.rebalance(d)
            return
        await self._apply(d, verdict.plan.prescale)
        s.rebalance_memory = after_step(
            s.rebalance_memory, d, verdict.plan, verdict.caps, spec, workflow.now()
        )

    def _scale_back(self, d: Decision) -> dict[str, int]:
        """On the return step that gives back the last share moved: the pre-scaled regions' replicas."""
        s = self.run.state
        mem = s.rebalance_memory
        if d.action != "return" or not mem.prescaled:
            return {}
        home, _ = mem.home(d.weights_before)
        if d.weights_after != home:
            return {}  # share still out: its targets still carry it
        return {r.name: r.replicas for r in s.spec.regions if r.name in mem.prescaled}

    async def _apply(self, d: Decision, prescale: dict[str, int]) -> None:
        s = self.run.state
        spec = s.spec
        inp = RebalanceInput(
            spec=spec,
            action="return" if d.action == "return" else "shed",
            weights_before=d.weights_before,
            weights_after=d.weights_after,
            prescale=prescale,
            scale_back=self._scale_back(d),
            reason="; ".join(d.reasons)[:300],
        )
        outcome: DecisionOutcome = "failed"
        self.stepping = True
        try:
            res = await run_rebalance(inp, f"rebalance {d.action}: {d.line()[:150]}")
            mem = s.rebalance_memory
            # Pre-scaled until a scale-back went through (or found nothing to do).
            back = set(inp.scale_back) - set(res.scale_back_errors) if res.status == "succeeded" else set()
            mem.prescaled = sorted((set(mem.prescaled) | set(res.scaled)) - back)
            d.weights_after = res.weights_after or d.weights_after
            if res.status == "succeeded":
                outcome = "applied"
            else:
                d.error = f"{res.status}: {res.error}"
            d.held_back += res.analysis
            d.held_back += [f"{r}: pre-scale failed: {e}" for r, e in sorted(res.prescale_errors.items())]
            d.held_back += [f"{r}: scale-back failed: {e}" for r, e in sorted(res.scale_back_errors.items())]
        except (WorkflowAlreadyStartedError, ChildWorkflowError) as exc:
            d.error = f"rebalance did not run: {exc}"
        finally:
            self.stepping = False
        d.outcome = outcome
        self.urgent = outcome == "applied"  # the next step is planned from fresh signals at once
        if self._record(d):
            self.notes.rebalance(d)

    def _record(self, d: Decision) -> bool:
        logged = self.run.state.decisions.record(d)
        if logged:
            workflow.logger.info("rebalance decision: %s", d.line())
        self.details()
        return logged

    # --- views ------------------------------------------------------------------------------------

    def view(self) -> DecisionsView:
        s = self.run.state
        log = s.decisions
        return DecisionsView(
            fleet=s.spec.fleet,
            rebalance=s.spec.rebalance,
            latest=log.latest,
            entries=list(log.entries),
            unchanged=log.unchanged,
            dropped=log.dropped,
        )

    def lines(self) -> list[str]:
        """The details markdown's rebalance section (Temporal UI)."""
        log = self.run.state.decisions
        if log.latest is None:
            return []
        s = self.run.state
        lines = [
            f"\n**rebalance** ({s.spec.rebalance}, tick {s.rebalance_memory.ticks}): "
            + safe_markdown(log.latest.line(), limit=DETAIL_CHARS)
        ]
        ev = log.latest.evidence
        if ev:
            lines.append(
                "\n| region | capacity | load | headroom | TTFT p99 ms | error rate |\n|---|---|---|---|---|---|"
            )
            for region, e in ev.items():
                lines.append(
                    f"| {region} | {e.get('capacity', '-')} | {e.get('load', '-')} | {e.get('headroom', '-')} "
                    f"| {e.get('ttft_p99_ms', '-')} | {e.get('error_rate', '-')} |"
                )
        return lines
