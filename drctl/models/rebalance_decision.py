"""The monitor's rebalance decision for one tick, as a pure function: readings and memory in, the
decision, its timing and the new memory out.

`decide_rebalance` holds every rule the rebalance applies on top of `plan_rebalance`: the breach
windows (a breach sheds only once sustained for `breach_window_s`, a SUSPECT region's breach or a
TTFT already as long as the window counting at once), which regions may receive share, return
stability (`return_stable_s`), shed spacing (`shed_step_interval_s`) and the back-off after a
failed step. `after_step` is the memory after the caller applied (or failed to apply) a step. The
workflow (workflows/monitor_rebalance.py) reads, calls these, applies and records; it judges
nothing itself. Each rule has its unit test in tests/units/test_rebalance_decision.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from drctl.models.capacity import (
    ALL_WITHIN,
    BreachState,
    CapacitySpec,
    RebalancePlan,
    RegionCapacity,
    RegionSignals,
    breaches,
    fleet_capacities,
    plan_rebalance,
)
from drctl.models.fleet_spec import FleetSpec
from drctl.models.health import RegionState
from drctl.models.monitor_decisions import Decision
from drctl.models.rebalance import RebalanceMemory, weight_points

MAX_DRAIN_MS = 30_000.0  # the longest a step waits for the requests queued before it (restart)
# An error rate over fewer requests than this says nothing (one failed request is not 100 %).
MIN_REQUESTS = 10


@dataclass(frozen=True)
class RebalanceTick:
    """What one tick read, beside the memory: the weights in effect and each region's signals."""

    current: dict[str, int]
    signals: dict[str, RegionSignals]
    # SUSPECT regions (passive or first-probe evidence) -> their passive TTFT p99, ms (None: not read).
    suspects: dict[str, float | None] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)  # regions not read, one line each
    votes: dict[str, str] = field(default_factory=dict)  # the quorum's views, for the record


@dataclass(frozen=True)
class RebalanceVerdict:
    """The tick's decision and what the caller needs to apply it and to time the next tick."""

    decision: Decision
    plan: RebalancePlan
    caps: dict[str, RegionCapacity]
    urgent: bool  # a breach is being timed: tick fast, so the shed comes when it is due
    at_rest: bool  # nothing to move or to time: the ticks may rest until a transition
    memory: RebalanceMemory
    # A step held back by time becomes due then (the shed spacing, the return's stability, the
    # back-off): the next tick comes no later, not a whole interval after it.
    due: datetime | None = None


def capacity_spec(spec: FleetSpec) -> CapacitySpec:
    """The capacity model's settings for the fleet `spec` describes."""
    return CapacitySpec(
        max_rps_per_replica=spec.max_rps_per_replica,
        max_concurrency_per_replica=spec.max_concurrency_per_replica,
        target_utilisation=spec.rebalance_limits.target_utilisation,
        ttft_p99_ms=spec.slo.ttft_p99_ms,
    )


def decide_rebalance(
    tick: RebalanceTick, memory: RebalanceMemory, spec: FleetSpec, now: datetime
) -> RebalanceVerdict:
    """The rebalance's decision at `now`. Never mutates `memory`: the new one is in the verdict."""
    mem = memory.model_copy(deep=True)
    limits, slo, current = spec.rebalance_limits, spec.slo, tick.current
    caps = fleet_capacities(tick.signals, capacity_spec(spec), mem.ceilings)
    mem.points = weight_points(caps, current)
    mem.ceilings |= {r: c.ceiling for r, c in caps.items() if c.ceiling is not None}
    found = {r: breaches(c, slo, min_requests=MIN_REQUESTS) for r, c in caps.items()}
    # A partial shed may act on passive evidence alone: the watcher's TTFT reading of a SUSPECT
    # region (a stalled one shows there seconds before any slow first token reaches the histograms).
    for r, why in passive_ttft_breaches(tick.suspects, slo.ttft_p99_ms).items():
        if r in found and "ttft" not in found[r]:
            found[r] = {**found[r], "ttft": why}
    mem.breaches = observed(mem.breaches, found, now)
    # A SUSPECT region breaching now has two independent signals agreeing (the watcher's passive
    # window, or a failed probe, and its replicas' own histograms): what the breach window guards
    # against, one noisy reading, is answered, so the breach counts as sustained at once. Only a
    # partial, reversible shed acts on this; a failover still needs the probes and the quorum.
    agreed = now - timedelta(seconds=limits.breach_window_s)
    mem.breaches = backdated(mem.breaches, {r: agreed for r in tick.suspects if found.get(r)})
    # A TTFT p99 of X ms shows only once those requests got their first token: they had been
    # waiting X ms, so the replicas were already that slow X ms ago, and the ttft breach began no
    # later than then (a gray failure's TTFT x20 is itself most of its window).
    waited = {
        r: now - timedelta(milliseconds=c.ttft_p99_ms)
        for r, c in caps.items()
        if c.ttft_p99_ms is not None and "ttft" in found.get(r, {})
    }
    mem.breaches = backdated(mem.breaches, waited, kinds={"ttft"})
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
        slo=slo,
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
        held_back=[*plan.held_back, *tick.missing],
        evidence=evidence(caps),
        thresholds=thresholds(spec),
        votes=dict(tick.votes),
    )
    # Breaching now but not yet for the whole window: tick fast, so the shed comes when it is due.
    timing = {
        r: kinds
        for r, kinds in found.items()
        if kinds and r not in sustained.breaching and r not in sustained.shortfall
    }
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
    due = _gate(d, plan, mem, spec, now)
    at_rest = d.action == "hold" and d.reasons == [ALL_WITHIN] and not tick.missing and not timing
    at_rest = at_rest and not tick.suspects
    return RebalanceVerdict(d, plan, caps, bool(timing), at_rest, mem, due)


def _gate(
    d: Decision, plan: RebalancePlan, mem: RebalanceMemory, spec: FleetSpec, now: datetime
) -> datetime | None:
    """The plan's step held back by time: return stability, shed spacing, the failed-step back-off.
    Returns when the last of the holds that apply ends (None: the step is not held back by time)."""
    limits = spec.rebalance_limits
    holds: list[datetime] = []
    # A return waits until the region has carried its share for return_stable_s, every tick.
    mem.return_since = (mem.return_since or now) if plan.action == "return" else None
    since = mem.return_since
    if since is not None and (now - since).total_seconds() < limits.return_stable_s:
        d.action, d.outcome = "hold", "held"
        due = since + timedelta(seconds=limits.return_stable_s)
        holds.append(due)
        d.reasons.append(
            f"the return is due at {due:%H:%M:%S} if the region still carries it: "
            f"{limits.return_stable_s:g} s stable from {since:%H:%M:%S}"
        )
    # Sheds step shed_step_interval_s apart: the last one's effect shows in the signals first.
    if d.action == "shed" and mem.next_shed_at is not None and now < mem.next_shed_at:
        d.action, d.outcome = "hold", "held"
        holds.append(mem.next_shed_at)
        d.reasons.append(
            f"the next shed step is due at {mem.next_shed_at:%H:%M:%S} "
            f"(shed_step_interval_s {limits.shed_step_interval_s:g})"
        )
    # A failed step holds the next for a while; a failed return never holds a shed.
    blocked = plan.action == "return" or mem.not_before_shed
    if plan.action != "hold" and blocked and mem.not_before is not None and now < mem.not_before:
        if d.action != "hold":
            d.action, d.outcome = "hold", "held"
            d.reasons.append(f"the last step failed: no other before {mem.not_before:%H:%M:%S}")
        holds.append(mem.not_before)
    return max(holds, default=None)


def after_step(
    memory: RebalanceMemory,
    d: Decision,
    plan: RebalancePlan,
    caps: dict[str, RegionCapacity],
    spec: FleetSpec,
    now: datetime,
) -> RebalanceMemory:
    """The memory after the caller applied `d` (outcome "applied") or failed to. Pure."""
    mem = memory.model_copy(deep=True)
    if d.outcome != "applied":
        # A busy fleet or a failing step: retrying every tick would start a workflow each time.
        mem.not_before = now + timedelta(seconds=max(30.0, 3 * spec.interval_s))
        mem.not_before_shed = d.action == "shed"
        return mem
    mem.applied(d.weights_before, d.weights_after)
    mem.not_before = None
    if d.action == "shed":
        mem.next_shed_at = now + timedelta(seconds=spec.rebalance_limits.shed_step_interval_s)
    for r in (r for r, delta in plan.moves.items() if delta < 0):
        # The next step off this region needs a whole window of evidence under the new share,
        # and its window starts only once the requests queued before the step have had their
        # first token (about its TTFT p99 now): until then its TTFT and load still show them.
        ttft = caps[r].ttft_p99_ms if r in caps else None
        drain = timedelta(milliseconds=min(ttft or 0.0, MAX_DRAIN_MS))
        mem.breaches = mem.breaches.restart(r, now + drain)
    return mem


def observed(state: BreachState, found: dict[str, dict[str, str]], now: datetime) -> BreachState:
    """The breach windows after this tick's readings; a region not read this tick loses its window
    (its breach must be seen again, reading after reading, before it sheds)."""
    kept = BreachState(
        since={r: k for r, k in state.since.items() if r in found},
        reasons={r: k for r, k in state.reasons.items() if r in found},
    )
    for r, kinds in found.items():
        kept = kept.observe(r, kinds, now)
    return kept


def backdated(state: BreachState, since: dict[str, datetime], kinds: set[str] | None = None) -> BreachState:
    """`state` with each listed region's breaches (of `kinds`, default all) counted from no later
    than the given moment."""
    out = state.model_copy(deep=True)
    for r, at in since.items():
        if r in out.since:
            out.since[r] = {
                k: min(t, at) if kinds is None or k in kinds else t for k, t in out.since[r].items()
            }
    return out


def passive_ttft_breaches(suspects: dict[str, float | None], objective_ms: float) -> dict[str, str]:
    """Region -> a TTFT breach line, for the SUSPECT regions whose passive TTFT is over the objective."""
    return {
        r: f"{r} TTFT p99 >= {ttft:.0f} ms > objective {objective_ms:.0f} ms (passive signals)"
        for r, ttft in suspects.items()
        if ttft is not None and ttft > objective_ms
    }


def suspects_of(trackers: dict[str, Any]) -> dict[str, float | None]:
    """The SUSPECT regions of the monitor's trackers -> their passive TTFT p99, ms."""
    return {r: t.passive_ttft_ms for r, t in trackers.items() if t.state is RegionState.SUSPECT}


def evidence(caps: dict[str, RegionCapacity]) -> dict[str, dict[str, Any]]:
    """Per region: every figure the capacity model used (it names them), how, and what it could not read."""
    out: dict[str, dict[str, Any]] = {}
    for r, c in caps.items():
        e: dict[str, Any] = {**c.evidence, "unit": c.unit, "source": c.source, "known": str(c.known)}
        if c.problems:
            e["problems"] = "; ".join(c.problems)[:300]
        out[r] = e
    return out


def thresholds(spec: FleetSpec) -> dict[str, Any]:
    """The objective and limits a decision was made against, for its record."""
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
