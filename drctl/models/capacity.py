"""A region's capacity, load and headroom, from its replicas' own signals: the capacity model.

Pure (no I/O, no clock): drctl/providers/capacity_signals.py reads the signals into a
`RegionSignals`; `region_capacity` turns them into a `RegionCapacity`; drctl/models/rebalance.py
decides what share moves. Every figure a decision uses is kept in `evidence`, so the decision log
can say why traffic is where it is. docs/rebalancing.md explains the model.

- capacity = ready replicas x the capacity of one replica;
- usable = capacity x target_utilisation (the rest is the margin a region keeps for bursts);
- headroom = usable - load: what the region can still take; negative when it carries too much.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from drctl.config.capacity import RebalanceLimits, SloConfig
from drctl.models.share_moves import apportion

if TYPE_CHECKING:
    from drctl.config.schema import FleetConfig

CapacityUnit = Literal["rps", "concurrency"]
Evidence = dict[str, float | int | str]


class RegionSignals(BaseModel):
    """What one region's serving replicas say about their load, read in one pass."""

    region: str
    ready_replicas: int = Field(ge=0, description="Ready endpoints of the serving tracks (EndpointSlices).")
    desired_replicas: int = Field(ge=0, description="Replicas the serving Deployments ask for.")
    running: float = Field(ge=0, description="Sum of vllm:num_requests_running over the ready replicas read.")
    waiting: float = Field(ge=0, description="Sum of vllm:num_requests_waiting over the ready replicas read.")
    max_num_seqs: int | None = Field(
        None, ge=1, description="Per replica, where the server tells it (the smallest reported); else None."
    )
    ttft_p99_ms: float | None = Field(
        None, description="TTFT p99 over the last window, from histogram deltas."
    )
    error_rate: float | None = Field(None, description="Failed share of the requests of the last window.")
    load_rps: float | None = Field(None, description="Requests per second over the last window.")
    requests: float | None = Field(None, ge=0, description="Requests answered in the last window.")
    window_s: float = Field(ge=0, description="Seconds the window behind the rates and quantiles covers.")
    measured_at: datetime
    replicas_read: int | None = Field(
        None, ge=0, description="Replicas whose /metrics answered (running and waiting sum over these)."
    )
    problems: list[str] = Field(default_factory=list, description="What could not be read, one line each.")


class CapacitySpec(BaseModel):
    """The configured side of the model: workload capacity settings and the objective it is held to."""

    max_rps_per_replica: float | None = Field(None, gt=0, description="workload.max_rps_per_replica.")
    max_concurrency_per_replica: int | None = Field(
        None, gt=0, description="workload.max_concurrency_per_replica."
    )
    target_utilisation: float = Field(0.8, gt=0, le=1, description="rebalance_limits.target_utilisation.")
    ttft_p99_ms: float | None = Field(
        None, gt=0, description="objectives.slo.ttft_p99_ms: a learned capacity stops where TTFT breaks it."
    )

    @classmethod
    def from_config(cls, cfg: FleetConfig) -> CapacitySpec:
        return cls(
            max_rps_per_replica=cfg.workload.max_rps_per_replica,
            max_concurrency_per_replica=cfg.workload.max_concurrency_per_replica,
            target_utilisation=cfg.failover.rebalance_limits.target_utilisation,
            ttft_p99_ms=cfg.objectives.slo.ttft_p99_ms,
        )


class RegionCapacity(BaseModel):
    """A region's capacity against its load, in one unit, with every figure that went into it."""

    region: str
    capacity: float = Field(ge=0, description="ready replicas x per_replica.")
    load: float = Field(ge=0, description="What the region carries now, in `unit`.")
    usable: float = Field(ge=0, description="capacity x target_utilisation: what the region may be given.")
    headroom: float = Field(
        description="usable - load; negative: over its usable capacity; 0 when not known."
    )
    unit: CapacityUnit
    per_replica: float = Field(ge=0)
    source: Literal["configured", "learned"]
    evidence: Evidence = Field(default_factory=dict, description="Every figure used, by name.")
    known: bool = Field(
        True,
        description="False when the signals could not establish the capacity or the load: the region then "
        "neither sheds for capacity nor receives share (an unknown is never taken as room).",
    )
    ready_replicas: int = 0
    desired_replicas: int = 0
    ttft_p99_ms: float | None = None
    error_rate: float | None = None
    requests: float | None = None
    problems: list[str] = Field(default_factory=list)

    def describe(self) -> str:
        """One line: the figures an operator reads first."""
        if not self.known:
            return f"{self.region}: capacity unknown ({'; '.join(self.problems) or 'no signal'})"
        return (
            f"{self.region}: load {self.load:.3g} of {self.usable:.3g} {self.unit} usable "
            f"({self.ready_replicas} ready x {self.per_replica:.3g} {self.source} x utilisation)"
        )


def _learned_per_replica(sig: RegionSignals, spec: CapacitySpec, ev: Evidence) -> float | None:
    """Concurrent requests one replica serves within the objective, as far as its signals show.

    - A replica runs at most max_num_seqs at once; the rest wait. So with requests waiting the
      running count is the ceiling reached, and max_num_seqs (when told) is the ceiling itself.
    - Without max_num_seqs and with nothing waiting the ceiling has not been reached: the
      capacity is unknown (the running count is only a floor), so None.
    - TTFT over the objective caps it further: the replicas are already past what they serve
      within it at the current concurrency; scaled by objective / TTFT (queueing delay grows at
      least in proportion to the excess load), it never rises above the running count.
    """
    n = sig.replicas_read if sig.replicas_read is not None else sig.ready_replicas
    if n <= 0:
        return None
    running_per = sig.running / n
    ev["running_per_replica"] = round(running_per, 3)
    ceiling: float | None = None
    if sig.max_num_seqs is not None:
        ceiling = float(sig.max_num_seqs)
    elif sig.waiting > 0 and sig.running > 0:
        ceiling = running_per
        ev["ceiling"] = "running while requests wait"
    if spec.ttft_p99_ms and sig.ttft_p99_ms and sig.ttft_p99_ms > spec.ttft_p99_ms and sig.running > 0:
        latency = running_per * spec.ttft_p99_ms / sig.ttft_p99_ms
        ev["latency_bound_per_replica"] = round(latency, 3)
        ceiling = latency if ceiling is None else min(ceiling, latency)
    return ceiling


def region_capacity(sig: RegionSignals, spec: CapacitySpec) -> RegionCapacity:
    """The region's capacity, load and headroom.

    Unit and per-replica capacity, in this order:
    - workload.max_rps_per_replica: rps; load is `load_rps` (unknown load: not `known`);
    - workload.max_concurrency_per_replica: concurrency; load is running + waiting (the queue is
      load the replicas could not take);
    - otherwise learned (see `_learned_per_replica`): concurrency, load running + waiting.
    headroom = ready_replicas x per_replica x target_utilisation - load.
    """
    ev: Evidence = {
        "ready_replicas": sig.ready_replicas,
        "desired_replicas": sig.desired_replicas,
        "running": sig.running,
        "waiting": sig.waiting,
        "target_utilisation": spec.target_utilisation,
        "window_s": sig.window_s,
    }
    for name in ("max_num_seqs", "ttft_p99_ms", "error_rate", "load_rps", "requests", "replicas_read"):
        if (v := getattr(sig, name)) is not None:
            ev[name] = round(v, 6) if isinstance(v, float) else v
    problems = list(sig.problems)
    unit: CapacityUnit
    per: float | None
    if spec.max_rps_per_replica is not None:
        unit, source, per = "rps", "configured", spec.max_rps_per_replica
        load = sig.load_rps
        if load is None:
            problems.append("no request rate read: the rps capacity has no load to compare")
    else:
        unit, load = "concurrency", sig.running + sig.waiting
        if spec.max_concurrency_per_replica is not None:
            source, per = "configured", float(spec.max_concurrency_per_replica)
        else:
            source, per = "learned", _learned_per_replica(sig, spec, ev)
            if per is None and sig.ready_replicas > 0:
                problems.append(
                    "capacity not learned yet: no max_num_seqs from the servers and no queue to show a ceiling"
                )
    ev["per_replica"] = round(per, 3) if per is not None else "unknown"
    known = per is not None and load is not None
    capacity = sig.ready_replicas * (per or 0.0)
    load_v = load or 0.0
    usable = capacity * spec.target_utilisation
    headroom = usable - load_v if known else 0.0
    ev.update(
        capacity=round(capacity, 3),
        usable=round(usable, 3),
        load=round(load_v, 3),
        headroom=round(headroom, 3),
    )
    return RegionCapacity(
        region=sig.region,
        capacity=capacity,
        load=load_v,
        usable=usable,
        headroom=headroom,
        unit=unit,
        per_replica=per or 0.0,
        source=source,
        evidence=ev,
        known=known,
        ready_replicas=sig.ready_replicas,
        desired_replicas=sig.desired_replicas,
        ttft_p99_ms=sig.ttft_p99_ms,
        error_rate=sig.error_rate,
        requests=sig.requests,
        problems=problems,
    )


# --- breaches, sustained for a window --------------------------------------------------------------


def breaches(cap: RegionCapacity, slo: SloConfig, *, min_requests: int = 1) -> dict[str, str]:
    """What is wrong with a region now, by kind: "capacity", "ttft", "errors" -> one line each.

    An error rate over fewer than `min_requests` requests says nothing (one failed probe is not 100 %).
    """
    out: dict[str, str] = {}
    if cap.known and cap.headroom < 0:
        out["capacity"] = f"{cap.region} load {cap.load:.3g} > usable {cap.usable:.3g} {cap.unit}"
    if cap.ttft_p99_ms is not None and cap.ttft_p99_ms > slo.ttft_p99_ms:
        out["ttft"] = f"{cap.region} TTFT p99 {cap.ttft_p99_ms:.0f} ms > objective {slo.ttft_p99_ms:.0f} ms"
    enough = cap.requests is None or cap.requests >= min_requests
    if cap.error_rate is not None and cap.error_rate > slo.error_rate and enough:
        out["errors"] = f"{cap.region} error rate {cap.error_rate:.1%} > objective {slo.error_rate:.1%}"
    return out


class Sustained(BaseModel):
    """What has lasted a whole window: the `breaching` and `shortfall` inputs of `plan_rebalance`."""

    breaching: dict[str, list[str]] = Field(default_factory=dict, description="Region -> SLO breach reasons.")
    shortfall: set[str] = Field(default_factory=set, description="Regions short of capacity all window.")


class BreachState(BaseModel):
    """Since when each region has breached what: kept by the monitor between ticks, updated purely.

    A breach that clears, even for one reading, starts its window again: "sustained" means every
    reading of the window breached.
    """

    since: dict[str, dict[str, datetime]] = Field(default_factory=dict)
    reasons: dict[str, dict[str, str]] = Field(default_factory=dict)

    def observe(self, region: str, found: dict[str, str], now: datetime) -> BreachState:
        """The state after a reading of `region` that found `found` (see `breaches`)."""
        old = self.since.get(region, {})
        since = {**self.since, region: {k: old.get(k, now) for k in found}}
        return BreachState(since=since, reasons={**self.reasons, region: dict(found)})

    def restart(self, region: str, now: datetime) -> BreachState:
        """After share moved off `region`: the next step needs another whole window of evidence."""
        since = {**self.since, region: dict.fromkeys(self.since.get(region, {}), now)}
        return BreachState(since=since, reasons=self.reasons)

    def sustained(self, window_s: float, now: datetime) -> Sustained:
        out = Sustained()
        for region, kinds in self.since.items():
            held = [k for k, t in kinds.items() if (now - t).total_seconds() >= window_s]
            slo = [self.reasons[region][k] for k in sorted(held) if k != "capacity"]
            if slo:
                out.breaching[region] = slo
            if "capacity" in held:
                out.shortfall.add(region)
        return out


# --- the rebalancing rule ----------------------------------------------------------------------------


class RebalancePlan(BaseModel):
    """One tick's decision, with everything it was made from."""

    action: Literal["hold", "shed", "return"]
    weights_before: dict[str, int]
    weights_after: dict[str, int]
    moved_pct: int = Field(description="Share of the total weight that moves, %.")
    reasons: list[str] = Field(default_factory=list, description="Why this action.")
    capacities: dict[str, RegionCapacity] = Field(default_factory=dict)
    held_back: list[str] = Field(default_factory=list, description="Why a move was capped or skipped.")
    prescale: dict[str, int] = Field(default_factory=dict, description="Region -> replicas wanted first.")

    @property
    def moves(self) -> dict[str, int]:
        """Region -> weight change (negative: it sheds)."""
        return {
            r: self.weights_after.get(r, 0) - w
            for r, w in self.weights_before.items()
            if self.weights_after.get(r, 0) != w
        }


def _pct(units: float, total: int) -> str:
    return f"{units * 100 / total:.0f}%"


def _breach_fraction(cap: RegionCapacity, slo: SloConfig | None, limits: RebalanceLimits) -> float:
    """The part of a breaching region's share to shed: how far its signal is over the objective.

    TTFT 4x the objective sheds 3/4 of the share, an error rate 10x over sheds 9/10 (both then
    capped by max_shift_pct). With no figure to scale by, one max_shift_pct step.
    """
    over = []
    if slo and cap.ttft_p99_ms and cap.ttft_p99_ms > slo.ttft_p99_ms:
        over.append(1 - slo.ttft_p99_ms / cap.ttft_p99_ms)
    if slo and cap.error_rate and cap.error_rate > slo.error_rate:
        over.append(1 - slo.error_rate / cap.error_rate)
    return max(over) if over else limits.max_shift_pct / 100


class _Rule:
    """The inputs of one `plan_rebalance` call and the figures derived from them."""

    def __init__(
        self,
        weights: dict[str, int],
        configured: dict[str, int],
        caps: dict[str, RegionCapacity],
        healthy: set[str],
        limits: RebalanceLimits,
    ) -> None:
        self.weights, self.caps, self.healthy, self.limits = weights, caps, healthy, limits
        self.total = sum(weights.values())
        conf_total = sum(configured.get(r, 0) for r in weights)
        # Configured weights on the current total's scale (a failover may have rescaled the weights).
        self.configured = {
            r: configured.get(r, 0) * self.total / conf_total if conf_total else 0.0 for r in weights
        }
        self.max_units = max(1, math.floor(limits.max_shift_pct * self.total / 100 + 1e-9))
        self.min_units = limits.min_step_pct * self.total / 100
        fed = [c for r, c in caps.items() if c.known and c.load > 0 and weights.get(r, 0) > 0]
        calm = [c for c in fed if c.headroom >= 0] or fed
        # Load per weight point, for a region without its own (no share, or no traffic yet).
        points = sum(weights[c.region] for c in calm)
        self.ref_load = sum(c.load for c in calm) / points if points else None

    def load_per_point(self, region: str) -> float | None:
        """What one weight point brings to `region`, in its own unit: its own rate where it has one.

        The region's own figure, because in concurrency units the same requests weigh more where
        they last longer (Little's law): a point moved to a faster region adds less concurrency.
        """
        c, w = self.caps[region], self.weights.get(region, 0)
        return c.load / w if w > 0 and c.load > 0 else self.ref_load

    def room(self, region: str) -> float:
        """Weight points `region` can take within its headroom."""
        per = self.load_per_point(region)
        return float(self.total) if per is None else self.caps[region].headroom / per


def _excess(
    rule: _Rule,
    breaching: dict[str, list[str]],
    shortfall: set[str] | None,
    slo: SloConfig | None,
    reasons: list[str],
    held: list[str],
) -> dict[str, float]:
    """Weight points each region should shed: its capacity shortfall or its breach, whichever is more."""
    out: dict[str, float] = {}
    for r in sorted(rule.weights):
        w, c = rule.weights[r], rule.caps.get(r)
        if r not in rule.healthy or w <= 0 or c is None:
            continue
        frac = 0.0
        if c.known and c.headroom < 0 and c.load > 0:
            if shortfall is None or r in shortfall:
                frac = 1 - c.usable / c.load
                reasons.append(
                    f"{r}: load {c.load:.3g} {c.unit} > usable {c.usable:.3g} ({c.ready_replicas} ready x "
                    f"{c.per_replica:.3g} {c.source} x {rule.limits.target_utilisation:g}): "
                    f"{frac:.0%} of its share is excess"
                )
            else:
                held.append(f"{r}: short of capacity, not yet for {rule.limits.breach_window_s:g}s")
        if r in breaching:
            br = max(_breach_fraction(c, slo, rule.limits), rule.min_units / w)
            reasons.append(
                f"{r}: {'; '.join(breaching[r])} (sustained): shed {min(br, 1.0):.0%} of its share"
            )
            frac = max(frac, br)
        units = min(float(w), w * frac)
        if units >= rule.min_units or (r in breaching and units > 0):
            out[r] = units
        elif units > 0:
            held.append(f"{r}: excess {_pct(units, rule.total)} < min_step_pct {rule.limits.min_step_pct}%")
    return out


def _targets(
    rule: _Rule, sources: dict[str, float], breaching: dict[str, list[str]], held: list[str]
) -> dict[str, float]:
    """Weight points each other region can take within its headroom."""
    out: dict[str, float] = {}
    for r in sorted(rule.weights):
        if r in sources:
            continue
        c = rule.caps.get(r)
        if r not in rule.healthy:
            held.append(f"{r}: not healthy, takes no share")
        elif c is None or not c.known:
            held.append(
                f"{r}: capacity unknown, takes no share" + (f" ({'; '.join(c.problems)})" if c else "")
            )
        elif r in breaching:
            held.append(f"{r}: breaches the objective, takes no share")
        elif c.headroom <= 0:
            held.append(f"{r} has no headroom (load {c.load:.3g} of {c.usable:.3g} {c.unit} usable)")
        else:
            out[r] = rule.room(r)
    return out


def _prescale(
    rule: _Rule,
    gains: dict[str, int],
    targets: dict[str, float],
    unplaced: float,
    max_replicas: dict[str, int],
) -> dict[str, int]:
    """Replicas each scalable target needs to carry its gain and its part of what did not fit."""
    extra_room: dict[str, float] = {}
    for r in targets:
        c, per = rule.caps[r], rule.load_per_point(r)
        top = max_replicas.get(r, 0)
        if per and c.per_replica > 0 and top > c.desired_replicas:
            extra_room[r] = (top - c.ready_replicas) * c.per_replica * rule.limits.target_utilisation / per
    room = sum(v for v in extra_room.values() if v > 0)
    out: dict[str, int] = {}
    for r, more in extra_room.items():
        c, per = rule.caps[r], rule.load_per_point(r) or 0.0
        extra = unplaced * max(more, 0.0) / room if room > 0 else 0.0
        load = c.load + (gains.get(r, 0) + extra) * per
        want = math.ceil(load / (c.per_replica * rule.limits.target_utilisation) - 1e-9)
        want = min(max_replicas[r], want)
        if want > c.desired_replicas:
            out[r] = want
    return out


def _shed(
    rule: _Rule,
    sources: dict[str, float],
    breaching: dict[str, list[str]],
    max_replicas: dict[str, int],
    plan: RebalancePlan,
) -> None:
    want = sum(sources.values())
    if want > rule.max_units:
        plan.held_back.append(
            f"max_shift_pct {rule.limits.max_shift_pct}% caps this step at {_pct(rule.max_units, rule.total)} "
            f"of the {_pct(want, rule.total)} excess"
        )
    budget = min(want, float(rule.max_units))
    targets = _targets(rule, sources, breaching, plan.held_back)
    room = sum(targets.values())
    if not targets:
        plan.held_back.append(f"no healthy region with headroom to take {_pct(budget, rule.total)}")
        return
    # Never past a target's headroom: each gets at most the whole points its headroom holds.
    gains = apportion(
        math.floor(min(budget, room) + 1e-9), targets, {r: math.floor(v + 1e-9) for r, v in targets.items()}
    )
    moved = sum(gains.values())
    unplaced = budget - moved
    if unplaced >= 0.5:
        plan.held_back.append(
            f"{_pct(unplaced, rule.total)} of the excess stays: the targets are at their headroom "
            f"({', '.join(f'{r} {v:.1f} points' for r, v in targets.items())})"
        )
    plan.prescale = _prescale(rule, gains, targets, max(unplaced, 0.0), max_replicas)
    for r, n in sorted(plan.prescale.items()):
        plan.held_back.append(f"{r}: pre-scale to {n} replicas for the share that waits")
    if moved == 0 or (moved < rule.min_units and moved < budget):
        if moved:
            plan.held_back.append(
                f"a move of {_pct(moved, rule.total)} is below min_step_pct {rule.limits.min_step_pct}%"
            )
        return
    losses = apportion(moved, sources, {r: math.ceil(v - 1e-9) for r, v in sources.items()})
    after = dict(rule.weights)
    for r, g in gains.items():
        after[r] += g
    for r, lost in losses.items():
        after[r] -= lost
    plan.action, plan.weights_after, plan.moved_pct = "shed", after, round(moved * 100 / rule.total)
    plan.reasons.append(
        "shed "
        + ", ".join(f"{r} -{n}" for r, n in sorted(losses.items()))
        + " to "
        + ", ".join(f"{r} +{n}" for r, n in sorted(gains.items()))
        + " (in proportion to headroom)"
    )


def _return(rule: _Rule, breaching: dict[str, list[str]], plan: RebalancePlan) -> None:
    """Move share back toward the configured weights, as far as each region carries it with the margin."""
    after = dict(rule.weights)
    budget = rule.max_units
    margin = 1 + rule.limits.hysteresis_pct / 100
    for r in sorted(rule.weights):
        short = rule.configured[r] - after[r]
        c = rule.caps.get(r)
        if short < 0.5 or r not in rule.healthy or c is None or not c.known or r in breaching or budget <= 0:
            if short >= 0.5 and budget > 0:
                plan.held_back.append(
                    f"{r}: below its configured share, but not healthy, known and within the objective"
                )
            continue
        per = rule.load_per_point(r)
        carry = rule.configured[r] if per is None else min(rule.configured[r], c.usable / (per * margin))
        step = min(math.floor(carry + 1e-9) - after[r], budget)
        completes = after[r] + step >= math.floor(rule.configured[r] + 1e-9)
        if step <= 0 or (step < rule.min_units and not completes):
            plan.held_back.append(
                f"{r}: {c.usable:.3g} {c.unit} usable carries {carry:.1f} points with the "
                f"{rule.limits.hysteresis_pct}% margin; it stays at {after[r]} of {rule.configured[r]:.0f}"
            )
            continue
        surplus = {g: after[g] - rule.configured[g] for g in after if after[g] - rule.configured[g] >= 1}
        gives = apportion(step, surplus, {g: math.floor(v + 1e-9) for g, v in surplus.items()})
        for g, n in gives.items():
            after[g] -= n
        got = sum(gives.values())
        after[r] += got
        budget -= got
        if got:
            plan.reasons.append(
                f"{r}: capacity back ({c.usable:.3g} {c.unit} usable carries {carry:.1f} points with the "
                f"{rule.limits.hysteresis_pct}% margin): {rule.weights[r]} -> {after[r]} of {rule.configured[r]:.0f}, "
                f"from {', '.join(f'{g} -{n}' for g, n in sorted(gives.items()))}"
            )
    moved = sum(max(0, after[r] - w) for r, w in rule.weights.items())
    if moved:
        plan.action, plan.weights_after, plan.moved_pct = "return", after, round(moved * 100 / rule.total)


def plan_rebalance(
    weights: dict[str, int],
    configured: dict[str, int],
    capacities: dict[str, RegionCapacity],
    breaching: dict[str, list[str]],
    healthy: set[str],
    limits: RebalanceLimits,
    max_replicas: dict[str, int],
    *,
    slo: SloConfig | None = None,
    shortfall: set[str] | None = None,
) -> RebalancePlan:
    """One tick of the proportional rebalance (docs/rebalancing.md, "The capacity model").

    Args:
        weights: the global weights now; configured: the fleet config's.
        capacities: `region_capacity` of each region read this tick.
        breaching: region -> SLO breach reasons sustained for breach_window_s (`BreachState.sustained`).
        healthy: regions this rule may move share off and onto. A region that is down is not in it:
            the failover owns it, and this rule neither sheds from it nor gives to it.
        max_replicas: region -> the most replicas it may be pre-scaled to.
        slo: the objective, to scale a breach's shed by how far it is over (else one max step).
        shortfall: regions short of capacity for the whole breach window (None: any shortfall now).

    Shed first: a region over its usable capacity, or breaching, sheds its excess to the healthy
    regions with headroom, in proportion to it, never past it. Otherwise return: share shed
    earlier moves back, at most max_shift_pct a step, as far as the region carries it with a
    hysteresis_pct margin. Weights stay integers with the same total.
    """
    plan = RebalancePlan(
        action="hold",
        weights_before=dict(weights),
        weights_after=dict(weights),
        moved_pct=0,
        capacities={r: c for r, c in capacities.items() if r in weights},
    )
    rule = _Rule(weights, configured, capacities, healthy, limits)
    if rule.total <= 0:
        plan.reasons.append("no region has weight: nothing to rebalance (the failover owns this)")
        return plan
    sources = _excess(rule, breaching, shortfall, slo, plan.reasons, plan.held_back)
    if sources:
        _shed(rule, sources, breaching, max_replicas, plan)
        if plan.action == "hold":
            plan.reasons.append("excess found, but nothing could move: see held_back")
        return plan
    _return(rule, breaching, plan)
    if plan.action == "hold" and not plan.reasons:
        plan.reasons.append("every region within its capacity and the objective")
    return plan
