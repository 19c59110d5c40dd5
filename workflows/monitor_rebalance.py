"""The monitor's capacity- and SLO-aware traffic: a tick that reads every serving region's capacity
signals, plans with `plan_rebalance`, records the decision with its evidence, and applies it.

Runs beside the probe loop (or the watcher) as one more task of the FleetMonitor, behind
`workflow.patched("monitor-rebalance")` and only while `failover.rebalance` is not `off`, so
histories recorded before it replay unchanged. Each tick:
- reads `read_capacity_signals` on each serving region's own queue, in parallel and bounded: a
  region whose worker does not answer is evidence ("no answer from ..."), never a crash, and gets no
  share moved to or from it;
- turns the signals into capacities (drctl/models/capacity.py), tracks SLO breaches so only a
  breach sustained for `breach_window_s` sheds, and asks `plan_rebalance` for the next step;
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
from typing import Any

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    CancelledError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from drctl.models.capacity import (
        BreachState,
        CapacitySpec,
        RegionCapacity,
        RegionSignals,
        breaches,
        fleet_capacities,
        plan_rebalance,
    )
    from drctl.models.capacity_sample import CapacityReadInput
    from drctl.models.capacity_watch import CapacityWatchInput, CapacityWatchResult
    from drctl.models.health import RegionState
    from drctl.models.monitor import RegionTracker
    from drctl.models.monitor_decisions import Decision, DecisionOutcome, DecisionsView
    from drctl.models.rebalance import RebalanceInput, weight_points
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
ALL_WITHIN = "every region within its capacity and the objective"  # the rule's hold reason
FAST_TICK_S = 1.0
MAX_DRAIN_MS = 30_000.0  # the longest a step waits for the requests queued before it (restart)
# An error rate over fewer requests than this says nothing (one failed request is not 100 %).
MIN_REQUESTS = 10
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
        cap_spec = _capacity_spec(spec)
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
        s = self.run.state
        spec, limits, mem, now = s.spec, s.spec.rebalance_limits, s.rebalance_memory, workflow.now()
        caps = fleet_capacities(signals, _capacity_spec(spec), mem.ceilings)
        mem.points = weight_points(caps, current)
        mem.ceilings |= {r: c.ceiling for r, c in caps.items() if c.ceiling is not None}
        found = {r: breaches(c, spec.slo, min_requests=MIN_REQUESTS) for r, c in caps.items()}
        # A partial shed may act on passive evidence alone: the watcher's TTFT reading of a SUSPECT
        # region (a stalled one shows there seconds before any slow first token reaches the histograms).
        for r, why in passive_ttft_breaches(s.trackers, spec.slo.ttft_p99_ms).items():
            if r in found and "ttft" not in found[r]:
                found[r] = {**found[r], "ttft": why}
        mem.breaches = _observed(mem.breaches, found, now)
        # A SUSPECT region breaching now has two independent signals agreeing (the watcher's passive
        # window, or a failed probe, and its replicas' own histograms): what the breach window guards
        # against, one noisy reading, is answered, so the breach counts as sustained at once. Only a
        # partial, reversible shed acts on this; a failover still needs the probes and the quorum.
        agreed = now - timedelta(seconds=limits.breach_window_s)
        suspect = {r for r, t in s.trackers.items() if t.state is RegionState.SUSPECT and found.get(r)}
        mem.breaches = _backdated(mem.breaches, dict.fromkeys(suspect, agreed))
        # A TTFT p99 of X ms shows only once those requests got their first token: they had been
        # waiting X ms, so the replicas were already that slow X ms ago, and the ttft breach began no
        # later than then (a gray failure's TTFT x20 is itself most of its window).
        waited = {
            r: now - timedelta(milliseconds=c.ttft_p99_ms)
            for r, c in caps.items()
            if c.ttft_p99_ms is not None and "ttft" in found.get(r, {})
        }
        mem.breaches = _backdated(mem.breaches, waited, kinds={"ttft"})
        sustained = mem.breaches.sustained(limits.breach_window_s, now)
        home, forgot = mem.home(current)
        # A region at 0 that the rebalance did not empty was set so by a failover or an operator: not a target.
        movable = {r for r in caps if home.get(r, 0) > 0 or current.get(r, 0) > 0}
        plan = plan_rebalance(
            current,
            home,
            caps,
            sustained.breaching,
            movable,
            limits,
            {r.name: r.max_replicas for r in spec.regions},
            slo=spec.slo,
            shortfall=sustained.shortfall,
        )
        d = Decision(
            at=now,
            action=plan.action,
            mode=spec.rebalance,
            outcome="held",
            weights_before=plan.weights_before,
            weights_after=plan.weights_after,
            moved_pct=plan.moved_pct,
            reasons=[*([forgot] if forgot else []), *plan.reasons],
            held_back=[*plan.held_back, *missing],
            evidence=_evidence(caps),
            thresholds=_thresholds(s.spec),
            votes={r: v.summary() for r, v in s.votes.items()},
        )
        # Breaching now but not yet for the whole window: tick fast, so the shed comes when it is due.
        timing = {
            r: kinds
            for r, kinds in found.items()
            if kinds and r not in sustained.breaching and r not in sustained.shortfall
        }
        self.urgent = bool(timing)
        if timing:
            d.reasons = [x for x in d.reasons if x != ALL_WITHIN]
        for r, kinds in timing.items():
            began = min(mem.breaches.since[r].values())
            if began > now:
                d.reasons.append(
                    f"{r} breaching; its window starts at {began:%H:%M:%S}, once the requests queued before "
                    f"the last step have had their first token: {'; '.join(kinds.values())}"
                )
                continue
            d.reasons.append(
                f"{r} breaching for {(now - began).total_seconds():.1f} s of the {limits.breach_window_s:g} s "
                f"window: {'; '.join(kinds.values())}"
            )
        # A return waits until the region has carried its share for return_stable_s, every tick.
        mem.return_since = (mem.return_since or now) if plan.action == "return" else None
        since = mem.return_since
        if since is not None and (now - since).total_seconds() < limits.return_stable_s:
            d.action, d.outcome = "hold", "held"
            due = since + timedelta(seconds=limits.return_stable_s)
            d.reasons.append(
                f"the return is due at {due:%H:%M:%S} if the region still carries it: "
                f"{limits.return_stable_s:g} s stable from {since:%H:%M:%S}"
            )
        # Sheds step shed_step_interval_s apart: the last one's effect shows in the signals first.
        if d.action == "shed" and mem.next_shed_at is not None and now < mem.next_shed_at:
            d.action, d.outcome = "hold", "held"
            d.reasons.append(
                f"the next shed step is due at {mem.next_shed_at:%H:%M:%S} "
                f"(shed_step_interval_s {limits.shed_step_interval_s:g})"
            )
        # A failed step holds the next for a while; a failed return never holds a shed.
        blocked = plan.action == "return" or mem.not_before_shed
        if d.action != "hold" and blocked and mem.not_before is not None and now < mem.not_before:
            d.action, d.outcome = "hold", "held"
            d.reasons.append(f"the last step failed: no other before {mem.not_before:%H:%M:%S}")
        if d.action == "hold":
            self._record(d)
            if d.reasons == [ALL_WITHIN] and not missing and not self.urgent and not self.suspects:
                self.at_rest = caps
            return
        if spec.rebalance == "advise":
            d.outcome = "advised"
            if self._record(d):
                self.notes.rebalance(d)
            return
        await self._apply(d, plan.prescale)
        if d.outcome == "applied":
            mem.applied(d.weights_before, d.weights_after)
            mem.not_before = None
            if d.action == "shed":
                mem.next_shed_at = workflow.now() + timedelta(seconds=limits.shed_step_interval_s)
        else:
            # A busy fleet or a failing step: retrying every tick would start a workflow each time.
            mem.not_before = workflow.now() + timedelta(seconds=max(30.0, 3 * spec.interval_s))
            mem.not_before_shed = d.action == "shed"
        if d.outcome == "applied":
            for r in (r for r, delta in plan.moves.items() if delta < 0):
                # The next step off this region needs a whole window of evidence under the new share,
                # and its window starts only once the requests queued before the step have had their
                # first token (about its TTFT p99 now): until then its TTFT and load still show them.
                ttft = caps[r].ttft_p99_ms if r in caps else None
                drain = timedelta(milliseconds=min(ttft or 0.0, MAX_DRAIN_MS))
                mem.breaches = mem.breaches.restart(r, workflow.now() + drain)

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


def _capacity_spec(spec: Any) -> CapacitySpec:
    return CapacitySpec(
        max_rps_per_replica=spec.max_rps_per_replica,
        max_concurrency_per_replica=spec.max_concurrency_per_replica,
        target_utilisation=spec.rebalance_limits.target_utilisation,
        ttft_p99_ms=spec.slo.ttft_p99_ms,
    )


def _observed(state: BreachState, found: dict[str, dict[str, str]], now: datetime) -> BreachState:
    """The breach windows after this tick's readings; a region not read this tick loses its window
    (its breach must be seen again, reading after reading, before it sheds)."""
    kept = BreachState(
        since={r: k for r, k in state.since.items() if r in found},
        reasons={r: k for r, k in state.reasons.items() if r in found},
    )
    for r, kinds in found.items():
        kept = kept.observe(r, kinds, now)
    return kept


def _backdated(state: BreachState, since: dict[str, datetime], kinds: set[str] | None = None) -> BreachState:
    """`state` with each listed region's breaches (of `kinds`, default all) counted from no later
    than the given moment."""
    out = state.model_copy(deep=True)
    for r, at in since.items():
        if r in out.since:
            out.since[r] = {
                k: min(t, at) if kinds is None or k in kinds else t for k, t in out.since[r].items()
            }
    return out


def passive_ttft_breaches(trackers: dict[str, RegionTracker], objective_ms: float) -> dict[str, str]:
    """Region -> a TTFT breach line, for the SUSPECT regions whose passive signals show TTFT over the objective."""
    return {
        r: f"{r} TTFT p99 >= {t.passive_ttft_ms:.0f} ms > objective {objective_ms:.0f} ms (passive signals)"
        for r, t in trackers.items()
        if t.state is RegionState.SUSPECT
        and t.passive_ttft_ms is not None
        and t.passive_ttft_ms > objective_ms
    }


def _evidence(caps: dict[str, RegionCapacity]) -> dict[str, dict[str, Any]]:
    """Per region: every figure the capacity model used (it names them), how, and what it could not read."""
    out: dict[str, dict[str, Any]] = {}
    for r, c in caps.items():
        e: dict[str, Any] = {**c.evidence, "unit": c.unit, "source": c.source, "known": str(c.known)}
        if c.problems:
            e["problems"] = "; ".join(c.problems)[:300]
        out[r] = e
    return out


def _thresholds(spec: Any) -> dict[str, Any]:
    lim = spec.rebalance_limits
    return {
        "slo_ttft_p99_ms": spec.slo.ttft_p99_ms,
        "slo_error_rate": spec.slo.error_rate,
        "breach_window_s": lim.breach_window_s,
        "min_step_pct": lim.min_step_pct,
        "max_shift_pct": lim.max_shift_pct,
        "hysteresis_pct": lim.hysteresis_pct,
        "target_utilisation": lim.target_utilisation,
    }
