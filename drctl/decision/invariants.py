"""Invariants that forbid harm: named pure checks over one decision or over a trace of them.

The unit tests, the property tests and the simulator assert them after every decision. Each check
returns the violations it found, each naming the check and what broke, so a failing world can say
exactly which promise it broke (docs/decisions.md, Invariants).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from drctl.decision.config import DecisionConfig
from drctl.decision.decision import Decision
from drctl.decision.evidence import FleetEvidence, Verdict
from drctl.decision.headroom import usable_points

# Integer weights are rounded shares: a target may sit this many points past its capacity.
ROUNDING_POINTS = 1.0
# Rules whose moves answer a change outside the steady fault: exempt from the stability window.
SAFETY_RULES = frozenset({"failover", "retreat", "reconcile"})

Step = tuple[FleetEvidence, Decision]


@dataclass(frozen=True)
class Violation:
    """A broken invariant: its name and what broke it."""

    name: str
    detail: str


def _serving(decision: Decision) -> list[str]:
    """Regions with share before the decision that are not DOWN."""
    return [
        r for r, w in decision.weights_before.items() if w > 0 and decision.verdicts[r] is not Verdict.DOWN
    ]


def _gainers(decision: Decision) -> list[str]:
    """Regions whose share of the traffic grows. Weights are relative: when those before do not
    sum to 100 they are compared as shares, and less than a point more is the rounding."""
    before = decision.weights_before
    total = sum(before.values())
    if total in (0, 100):
        return [r for r, w in decision.weights_after.items() if w > before.get(r, 0)]
    return [r for r, w in decision.weights_after.items() if w - before.get(r, 0) * 100 / total >= 1]


def no_share_onto_unsafe(
    evidence: FleetEvidence, decision: Decision, config: DecisionConfig
) -> list[Violation]:
    """Share goes only onto HEALTHY regions, or SATURATED ones when every serving one is SATURATED.

    Weights that were all zero (nothing served) with no HEALTHY region leave no safe choice: exempt."""
    if sum(decision.weights_before.values()) == 0 and Verdict.HEALTHY not in decision.verdicts.values():
        return []
    serving = [r for r in _serving(decision) if r not in _losers(decision)] or _serving(decision)
    fleet_full = bool(serving) and all(decision.verdicts[r] is Verdict.SATURATED for r in serving)
    out = []
    for r in _gainers(decision):
        v = decision.verdicts[r]
        if v is Verdict.HEALTHY or (v is Verdict.SATURATED and fleet_full):
            continue
        out.append(
            Violation(
                "no_share_onto_unsafe",
                f"{r} is {v.value} and went {decision.weights_before.get(r, 0)} -> {decision.weights_after[r]}",
            )
        )
    return out


def _losers(decision: Decision) -> list[str]:
    return [r for r, w in decision.weights_after.items() if w < decision.weights_before.get(r, 0)]


def weights_sum_100(evidence: FleetEvidence, decision: Decision, config: DecisionConfig) -> list[Violation]:
    """Every configured region is a key, every weight a non-negative integer, and they sum to 100."""
    out = []
    w = decision.weights_after
    if set(w) != set(evidence.regions):
        out.append(
            Violation("weights_sum_100", f"regions {sorted(w)} != configured {sorted(evidence.regions)}")
        )
    if any(v < 0 for v in w.values()):
        out.append(Violation("weights_sum_100", f"a negative weight in {w}"))
    if sum(w.values()) != 100:
        out.append(Violation("weights_sum_100", f"weights {w} sum to {sum(w.values())}, not 100"))
    return out


def within_capacity_while_headroom(
    evidence: FleetEvidence, decision: Decision, config: DecisionConfig
) -> list[Violation]:
    """No region given share beyond its usable capacity while another HEALTHY one has room.

    Judged on steady loads only: loads read while the weights changed mix two weightings, and the
    capacity in points they give is not a fact to hold a decision to."""
    if not evidence.loads_steady:
        return []
    answering = [r for r, v in decision.verdicts.items() if v not in (Verdict.DOWN, Verdict.UNKNOWN)]
    points = usable_points(evidence.regions, decision.weights_before, config, answering)
    out = []
    for r in _gainers(decision):
        if r not in points or decision.weights_after[r] <= points[r] + ROUNDING_POINTS:
            continue
        roomy = [
            o
            for o, cap in points.items()
            if o != r
            and decision.verdicts[o] is Verdict.HEALTHY
            and decision.weights_after[o] < cap - ROUNDING_POINTS
        ]
        if roomy:
            out.append(
                Violation(
                    "within_capacity_while_headroom",
                    f"{r} given {decision.weights_after[r]} over its usable {points[r]:.1f} points while "
                    f"{', '.join(roomy)} had room",
                )
            )
    return out


PER_DECISION = (no_share_onto_unsafe, weights_sum_100, within_capacity_while_headroom)


def check_decision(evidence: FleetEvidence, decision: Decision, config: DecisionConfig) -> list[Violation]:
    """Every per-decision invariant."""
    return [v for check in PER_DECISION for v in check(evidence, decision, config)]


def retreat_within_one_tick(steps: list[Step], config: DecisionConfig) -> list[Violation]:
    """A region that gained in a failback or return step (not a retreat, which undoes one) and is not
    HEALTHY at the next tick is back at or below its share before that step, unless no other region
    could take it."""
    out = []
    for (_, prev), (ev, now) in zip(steps, steps[1:], strict=False):
        # A step only advised was never applied; a next decision only advised cannot move anything.
        # A retreat is itself the reversal: the shares it gives back are those held before the step,
        # not a step onto a region, so only forward failback and return steps are held to it.
        if (
            prev.advisory
            or now.advisory
            or prev.action not in ("failback", "return")
            or prev.rule == "retreat"
        ):
            continue
        for r in _gainers(prev):
            if now.verdicts[r] is Verdict.HEALTHY:
                continue
            others = [o for o, v in now.verdicts.items() if o != r and v is Verdict.HEALTHY]
            if others and now.weights_after[r] > prev.weights_before[r]:
                out.append(
                    Violation(
                        "retreat_within_one_tick",
                        f"at {ev.at}: {r} is {now.verdicts[r].value} and keeps {now.weights_after[r]} "
                        f"(was {prev.weights_before[r]} before the step)",
                    )
                )
    return out


def down_drained_within_rto(steps: list[Step], config: DecisionConfig) -> list[Violation]:
    """No region DOWN keeps weight longer than rto_target_s while another region can serve
    (HEALTHY, or SATURATED when it is all the fleet has). Policy manual only advises: exempt."""
    if config.policy == "manual":
        return []
    down_since: dict[str, datetime] = {}
    out = []
    for ev, d in steps:
        for r, v in d.verdicts.items():
            if v is not Verdict.DOWN:
                down_since.pop(r, None)
                continue
            since = down_since.setdefault(r, ev.at)
            others = [
                o for o, ov in d.verdicts.items() if o != r and ov in (Verdict.HEALTHY, Verdict.SATURATED)
            ]
            late = (ev.at - since).total_seconds() > config.rto_target_s
            if late and others and d.weights_after[r] > 0:
                out.append(
                    Violation(
                        "down_drained_within_rto",
                        f"at {ev.at}: {r} DOWN since {since} still has {d.weights_after[r]} while "
                        f"{', '.join(others)} can serve",
                    )
                )
    return out


def no_flapping(steps: list[Step], config: DecisionConfig) -> list[Violation]:
    """A region's weight, along the decisions' applied targets, changes direction at most once per
    stability_window_s, safety moves (failover, retreat, reconcile) aside."""
    last: dict[str, tuple[int, datetime]] = {}
    prev: dict[str, int] | None = None
    out = []
    for ev, d in steps:
        if d.advisory:
            continue
        before = prev if prev is not None else d.weights_before
        for r, w in d.weights_after.items():
            change = w - before.get(r, 0)
            direction = (change > 0) - (change < 0)
            if direction == 0:
                continue
            seen = last.get(r)
            if seen is not None and seen[0] != direction:
                quick = (ev.at - seen[1]).total_seconds() < config.stability_window_s
                if quick and d.rule not in SAFETY_RULES:
                    out.append(
                        Violation(
                            "no_flapping",
                            f"at {ev.at}: {r} turned ({d.rule}) {(ev.at - seen[1]).total_seconds():g} s "
                            f"after its last turn, within {config.stability_window_s:g} s",
                        )
                    )
            if seen is None or seen[0] != direction:
                last[r] = (direction, ev.at)
        prev = d.weights_after
    return out


OVER_TRACE = (retreat_within_one_tick, down_drained_within_rto, no_flapping)


def check_trace(steps: list[Step], config: DecisionConfig) -> list[Violation]:
    """Every per-decision invariant at each step, then every invariant over the trace."""
    out = [v for ev, d in steps for v in check_decision(ev, d, config)]
    return out + [v for check in OVER_TRACE for v in check(steps, config)]
