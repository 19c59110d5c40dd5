"""The arithmetic of one rebalancing tick: excess share, targets' room, pre-scaling, return steps.

Called by `drctl.models.capacity.plan_rebalance` (the rule as a whole is documented there and in
docs/rebalancing.md). Weight points are the units of the global weights; a region's load per
point converts its headroom into the points it can take.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from drctl.models.failover_plan import WEIGHT_CAP
from drctl.models.share_moves import apportion

if TYPE_CHECKING:
    from drctl.config.capacity import RebalanceLimits, SloConfig
    from drctl.models.capacity import RebalancePlan, RegionCapacity

# Below this a load is no load: a gauge's rounding must not turn one point into a fleet's worth.
LOAD_EPS = 1e-6


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


class Rule:
    """The inputs of one `plan_rebalance` call and the figures derived from them."""

    def __init__(
        self,
        weights: dict[str, int],
        configured: dict[str, int],
        caps: dict[str, RegionCapacity],
        healthy: set[str],
        limits: RebalanceLimits,
        slo: SloConfig | None = None,
    ) -> None:
        self.weights, self.caps, self.healthy, self.limits, self.slo = weights, caps, healthy, limits, slo
        self.total = sum(weights.values())
        conf_total = sum(configured.get(r, 0) for r in weights)
        # Configured weights on the current total's scale (a failover may have rescaled the weights).
        self.configured = {
            r: configured.get(r, 0) * self.total / conf_total if conf_total else 0.0 for r in weights
        }
        self.max_units = max(1, math.floor(limits.max_shift_pct * self.total / 100 + 1e-9))
        self.min_units = limits.min_step_pct * self.total / 100
        # The fleet's load over its usable capacity, never below 1: when the regions together carry more
        # than they can, each is held to the same share of its own usable capacity (level x usable),
        # so share is never shed onto a region as loaded as the source, and two overloaded regions
        # do not hand it back and forth.
        pool = [c for r, c in caps.items() if c.known and r in healthy and r in weights]
        usable = sum(c.usable for c in pool)
        # Never above 1 / target_utilisation: no target is given more than its whole capacity.
        most = 1 / limits.target_utilisation
        self.level = min(most, max(1.0, sum(c.load for c in pool) / usable)) if usable > 0 else 1.0
        fed = [c for r, c in caps.items() if c.known and c.load > LOAD_EPS and weights.get(r, 0) > 0]
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
        return c.load / w if w > 0 and c.load > LOAD_EPS else self.ref_load

    def headroom(self, c: RegionCapacity) -> float:
        """What `c` can still take at the fleet's level: its headroom, or, when the fleet is over its
        usable capacity, its room below that same level."""
        return c.usable * self.level - c.load

    def room(self, region: str) -> float:
        """Weight points `region` can take within its headroom, and within what one weighted record
        holds (Route 53 takes at most 255)."""
        per = self.load_per_point(region)
        most = float(min(self.total, WEIGHT_CAP - self.weights.get(region, 0)))
        room = self.headroom(self.caps[region])
        if per is None or room >= per * most:
            return max(most, 0.0)
        return room / per

    def unproven(self, region: str) -> bool:
        """Below its configured share (shed earlier) with no TTFT reading: too little traffic shows
        nothing of the objective, and a fault that only shows under load (a slow region) would take
        the share and shed it again. Such a region gets share back only by a return, which waits for
        return_stable_s (drctl/models/rebalance_decision.py)."""
        c = self.caps[region]
        shed = self.weights.get(region, 0) + 0.5 < self.configured.get(region, 0.0)
        return self.slo is not None and shed and c.ttft_p99_ms is None

    def over_objective(self, c: RegionCapacity) -> bool:
        """Breaching the objective now, sustained or not: such a region takes no share."""
        if self.slo is None:
            return False
        slow = c.ttft_p99_ms is not None and c.ttft_p99_ms > self.slo.ttft_p99_ms
        return slow or (c.error_rate is not None and c.error_rate > self.slo.error_rate)


def excess(
    rule: Rule,
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
        if c.known and rule.headroom(c) < 0 and c.load > 0:
            if shortfall is None or r in shortfall:
                frac = 1 - c.usable * rule.level / c.load
                over = (
                    f"; the fleet carries {rule.level:.2f} x its usable capacity, each region as much of its own"
                    if rule.level > 1
                    else ""
                )
                reasons.append(
                    f"{r}: load {c.load:.3g} {c.unit} > usable {c.usable:.3g} ({c.ready_replicas} ready x "
                    f"{c.per_replica:.3g} {c.source} x {rule.limits.target_utilisation:g}){over}: "
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


def targets(
    rule: Rule, sources: dict[str, float], breaching: dict[str, list[str]], held: list[str]
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
        elif r in breaching or rule.over_objective(c):
            held.append(f"{r}: breaches the objective, takes no share")
        elif rule.unproven(r):
            held.append(
                f"{r}: shed earlier and carries too little traffic to show the objective met: "
                "its share comes back only by a return"
            )
        elif rule.headroom(c) <= 0:
            level = f" at the fleet's {rule.level:.2f} x" if rule.level > 1 else ""
            held.append(f"{r} has no headroom (load {c.load:.3g} of {c.usable:.3g} {c.unit} usable{level})")
        else:
            out[r] = rule.room(r)
    return out


def prescale(
    rule: Rule,
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
            more = (top - c.ready_replicas) * c.per_replica * rule.limits.target_utilisation / per
            extra_room[r] = min(more, float(rule.total))
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


def shed(
    rule: Rule,
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
    found = targets(rule, sources, breaching, plan.held_back)
    room = sum(found.values())
    if not found:
        plan.held_back.append(f"no healthy region with headroom to take {_pct(budget, rule.total)}")
        return
    # Never past a target's headroom: each gets at most the whole points its headroom holds.
    gains = apportion(
        math.floor(min(budget, room) + 1e-9), found, {r: math.floor(v + 1e-9) for r, v in found.items()}
    )
    moved = sum(gains.values())
    unplaced = budget - moved
    if unplaced >= 0.5:
        plan.held_back.append(
            f"{_pct(unplaced, rule.total)} of the excess stays: the targets are at their headroom "
            f"({', '.join(f'{r} {v:.1f} points' for r, v in found.items())})"
        )
    plan.prescale = prescale(rule, gains, found, max(unplaced, 0.0), max_replicas)
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


def give_back(rule: Rule, breaching: dict[str, list[str]], plan: RebalancePlan) -> None:
    """Move share back toward the configured weights, as far as each region carries it with the margin."""
    after = dict(rule.weights)
    budget = rule.max_units
    margin = 1 + rule.limits.hysteresis_pct / 100
    for r in sorted(rule.weights):
        short = rule.configured[r] - after[r]
        c = rule.caps.get(r)
        if short < 0.5 or budget <= 0:
            continue
        if c is None or r not in rule.healthy or not c.known or r in breaching or rule.over_objective(c):
            plan.held_back.append(
                f"{r}: below its configured share, but not healthy, known and within the objective"
            )
            continue
        per = rule.load_per_point(r)
        # No usable capacity carries nothing, even while the fleet is too idle to weigh a point.
        if c.usable <= 0:
            carry = 0.0
        elif per is None:
            carry = rule.configured[r]
        else:
            carry = min(rule.configured[r], c.usable / (per * margin))
        carry = min(carry, float(WEIGHT_CAP))
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
