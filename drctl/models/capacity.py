"""A region's capacity, load and headroom, from its replicas' own signals: the capacity model.

Pure (no I/O, no clock): drctl/providers/capacity_signals.py reads the signals into a
`RegionSignals`; `region_capacity` turns them into a `RegionCapacity`; `BreachState` tells what has
lasted a window; `plan_rebalance` decides what share moves (its arithmetic in rebalance_rule.py).
Every figure a decision uses is kept in `evidence`, so the decision log can say why traffic is
where it is. docs/rebalancing.md explains the model.

- capacity = ready replicas x the capacity of one replica;
- usable = capacity x target_utilisation (the rest is the margin a region keeps for bursts);
- headroom = usable - load: what the region can still take; negative when it carries too much.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from drctl.config.capacity import RebalanceLimits, SloConfig
from drctl.models import rebalance_rule

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
    running_while_waiting: float | None = Field(
        None,
        ge=0,
        description="The most requests one replica ran while requests waited on it (its slot ceiling "
        "reached); None when no replica had a queue.",
    )
    ttft_p99_ms: float | None = Field(
        None, description="TTFT p99 over the last window, from histogram deltas."
    )
    error_rate: float | None = Field(None, description="Failed share of the requests of the last window.")
    load_rps: float | None = Field(
        None,
        description="Requests per second over the last window, over the ready replicas (scaled up from "
        "those read at both ends of the window when some were not).",
    )
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
    ceiling: float | None = Field(
        None,
        description="Learned only: the slot ceiling per replica this reading showed (max_num_seqs, or "
        "the running count while requests waited), for later readings and other regions.",
    )
    problems: list[str] = Field(default_factory=list)

    def describe(self) -> str:
        """One line: the figures an operator reads first."""
        if not self.known:
            return f"{self.region}: capacity unknown ({'; '.join(self.problems) or 'no signal'})"
        return (
            f"{self.region}: load {self.load:.3g} of {self.usable:.3g} {self.unit} usable "
            f"({self.ready_replicas} ready x {self.per_replica:.3g} {self.source} x utilisation)"
        )


def slot_ceiling(sig: RegionSignals) -> tuple[float | None, str]:
    """The per-replica slot ceiling this reading shows, and how it shows it (None: it shows none).

    A replica runs at most max_num_seqs requests at once and queues the rest, so max_num_seqs (when
    told) is the ceiling, and a replica with requests waiting runs as many as its ceiling lets it.
    Every such count is a lower bound of the true ceiling, never above it.
    """
    if sig.max_num_seqs is not None:
        return float(sig.max_num_seqs), "max_num_seqs"
    if sig.running_while_waiting:
        return sig.running_while_waiting, "running while requests wait"
    n = sig.replicas_read if sig.replicas_read is not None else sig.ready_replicas
    if sig.waiting > 0 and sig.running > 0 and n > 0:  # sums only: the average replica
        return sig.running / n, "running while requests wait (mean of the replicas)"
    return None, ""


def _learned_per_replica(
    sig: RegionSignals, spec: CapacitySpec, ev: Evidence, known_ceiling: float | None
) -> tuple[float | None, float | None]:
    """Concurrent requests one replica serves within the objective, as far as the signals show;
    and the slot ceiling it rests on (what a caller remembers as `known_ceiling` for later readings).

    - The slot ceiling: the highest of what this reading shows (`slot_ceiling`) and `known_ceiling`
      (learned earlier, or in another region of the same workload). Each is a lower bound of the
      true ceiling, so the highest is the closest. Without either, the capacity is unknown: a
      running count without a queue is only a floor.
    - TTFT over the objective caps it further: at the current concurrency the replicas are already
      past what they serve within it. Scaled by objective / TTFT (queueing delay grows at least in
      proportion to the excess load), it never rises above the running count.
    """
    n = sig.replicas_read if sig.replicas_read is not None else sig.ready_replicas
    if n <= 0:
        return None, known_ceiling
    running_per = sig.running / n
    ev["running_per_replica"] = round(running_per, 3)
    seen, how = slot_ceiling(sig)
    ceiling = max((c for c in (seen, known_ceiling) if c is not None), default=None)
    if ceiling is not None:
        ev["slot_ceiling"] = round(ceiling, 3)
        ev["ceiling"] = (
            how if seen is not None and seen >= (known_ceiling or 0) else "learned earlier or elsewhere"
        )
    per = ceiling
    if spec.ttft_p99_ms and sig.ttft_p99_ms and sig.ttft_p99_ms > spec.ttft_p99_ms and sig.running > 0:
        latency = running_per * spec.ttft_p99_ms / sig.ttft_p99_ms
        ev["latency_bound_per_replica"] = round(latency, 3)
        per = latency if per is None else min(per, latency)
    return per, ceiling


def _concurrency_load(sig: RegionSignals, ev: Evidence, problems: list[str]) -> float | None:
    """running + waiting over the ready replicas: scaled up from the replicas read when some were
    not (a missed read must not look like room); unknown when none was."""
    read = sig.replicas_read if sig.replicas_read is not None else sig.ready_replicas
    load = sig.running + sig.waiting
    if sig.ready_replicas == 0 or read >= sig.ready_replicas:
        return load
    if read == 0:
        problems.append(f"no /metrics read from the {sig.ready_replicas} ready replicas: load unknown")
        return None
    ev["load_scaled_from"] = f"{read} of {sig.ready_replicas} ready replicas"
    return load * sig.ready_replicas / read


def region_capacity(
    sig: RegionSignals, spec: CapacitySpec, *, known_ceiling: float | None = None
) -> RegionCapacity:
    """The region's capacity, load and headroom.

    `known_ceiling`: a learned replica's slot ceiling from an earlier reading or another region
    (`RegionCapacity.ceiling`; see `fleet_capacities`); the higher of it and what this reading shows counts.

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
    ceiling: float | None = None
    if spec.max_rps_per_replica is not None:
        unit, source, per = "rps", "configured", spec.max_rps_per_replica
        load = sig.load_rps
        if load is None:
            problems.append("no request rate read: the rps capacity has no load to compare")
    else:
        unit, load = "concurrency", _concurrency_load(sig, ev, problems)
        if spec.max_concurrency_per_replica is not None:
            source, per = "configured", float(spec.max_concurrency_per_replica)
        else:
            source = "learned"
            per, ceiling = _learned_per_replica(sig, spec, ev, known_ceiling)
            if sig.ready_replicas == 0:
                per = per or 0.0  # no replica: no capacity, whatever one would serve
            elif per is None:
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
        ceiling=ceiling,
        problems=problems,
        **sig.model_dump(include=_COPIED),
    )


# The signals a capacity carries as they were read, for the breach checks and the decision log.
_COPIED = {"ready_replicas", "desired_replicas", "ttft_p99_ms", "error_rate", "requests"}


def fleet_capacities(
    signals: dict[str, RegionSignals], spec: CapacitySpec, remembered: dict[str, float] | None = None
) -> dict[str, RegionCapacity]:
    """Every region's capacity, sharing what any region's replicas showed of their slot ceiling.

    Every region runs the same workload (one image, one model, the same server flags), so a slot
    ceiling seen anywhere is everyone's: the highest seen now, or the region's `remembered` one
    (its last `ceiling`) if higher, stands in. A region that has never queued can then take share.
    A latency bound is never shared: it is that region's. (A remembered ceiling outlives a change
    of max_num_seqs: forget it when the servers' flags change.)
    """
    seen = [c for s in signals.values() if (c := slot_ceiling(s)[0]) is not None]
    shared = max(seen, default=None)
    out = {}
    for r, s in signals.items():
        known = [c for c in (shared, (remembered or {}).get(r)) if c is not None]
        out[r] = region_capacity(s, spec, known_ceiling=max(known, default=None))
    return out


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


ALL_WITHIN = "every region within its capacity and the objective"  # the rule's plain hold reason


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
        weights: the global weights now.
        configured: where a return goes back to: the fleet config's weights, or whatever baseline the
            caller holds (after a failover, the failback owns the way back, not this rule).
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
    rule = rebalance_rule.Rule(weights, configured, capacities, healthy, limits, slo)
    if rule.total <= 0:
        plan.reasons.append("no region has weight: nothing to rebalance (the failover owns this)")
        return plan
    sources = rebalance_rule.excess(rule, breaching, shortfall, slo, plan.reasons, plan.held_back)
    if sources:
        rebalance_rule.shed(rule, sources, breaching, max_replicas, plan)
        if plan.action == "hold":
            plan.reasons.append("excess found, but nothing could move: see held_back")
        return plan
    rebalance_rule.give_back(rule, breaching, plan)
    if plan.action == "hold" and not plan.reasons:
        plan.reasons.append(ALL_WITHIN)
    return plan
