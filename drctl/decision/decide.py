"""The decision function: evidence and memory in, a decision and the new memory out.

The verdicts come first (drctl/decision/verdict.py); then the weights to start from (those in
effect, or those applied when the tier cannot be read or has drifted and mode is automatic); then
the rules in priority order, the first that fires deciding (docs/decisions.md, Rules).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from drctl.decision.config import DecisionConfig
from drctl.decision.decision import Decision
from drctl.decision.evidence import FleetEvidence, Verdict
from drctl.decision.headroom import largest_remainder
from drctl.decision.memory import DecisionMemory, RegionMemory
from drctl.decision.rules import reconcile
from drctl.decision.rules.failover import failover
from drctl.decision.rules.retreat import retreat
from drctl.decision.rules.returning import returning
from drctl.decision.rules.shed import shed
from drctl.decision.tick import Outcome, Tick
from drctl.decision.verdict import judge_region

Rule = Callable[[Tick, list[str]], Outcome | None]
# Safety rules run whatever the weights' readability or a back-off; the others need both.
SAFETY_RULES: tuple[Rule, ...] = (failover, retreat)
BALANCE_RULES: tuple[Rule, ...] = (shed, returning)


def _restrict(weights: dict[str, int] | None, names: list[str]) -> dict[str, int] | None:
    """`weights` over exactly the configured regions (missing ones 0, unknown ones dropped)."""
    return None if weights is None else {r: max(0, weights.get(r, 0)) for r in names}


def _normalised(weights: dict[str, int], home: dict[str, int], healthy: list[str]) -> dict[str, int]:
    """Weights summing to 100 (a hand edit may leave them off): over 100 scaled down; under it, the
    missing share onto the HEALTHY regions (scaled if there are none); all zero: the home weights
    of the HEALTHY regions (of all, if none is)."""
    total = sum(weights.values())
    if total == 100:
        return dict(weights)
    if total <= 0 and healthy:
        keys = {r: float(home[r]) if r in healthy else 0.0 for r in weights}
        if sum(keys.values()) <= 0:
            keys = {r: float(r in healthy) for r in weights}
        return largest_remainder(keys)
    if total <= 0:
        return dict(home)
    floats = {r: float(w) for r, w in weights.items()}
    if total < 100 and healthy:
        keys = (
            {r: floats[r] for r in healthy}
            if sum(floats[r] for r in healthy) > 0
            else dict.fromkeys(healthy, 1.0)
        )
        for r, k in keys.items():
            floats[r] += (100 - total) * k / sum(keys.values())
    return largest_remainder(floats)


@dataclass(frozen=True)
class Prepared:
    """The judged tick before any rule: the rules' `tick`, and what reconcile needs."""

    tick: Tick
    before: dict[str, int]  # the weights the decision starts from, as read (or applied, unreadable)
    why: dict[str, str]  # region -> the reason for its verdict
    in_effect: dict[str, int] | None
    applied: dict[str, int] | None
    drifted: bool  # the weights in effect differ from those applied (or do not sum to 100)
    correct: bool  # ... and are corrected this tick (mode automatic, no back-off)


def prepare(
    evidence: FleetEvidence, memory: DecisionMemory, config: DecisionConfig, now: datetime
) -> Prepared:
    """The verdicts, and the weights the rules start from: those in effect; those applied when the
    tier cannot be read; what reconcile allows when they drifted and mode is automatic."""
    names = list(evidence.regions)
    home = largest_remainder({r: float(evidence.regions[r].home_weight) for r in names})
    if sum(home.values()) == 0:
        home = largest_remainder(dict.fromkeys(names, 1.0))
    verdicts: dict[str, Verdict] = {}
    why: dict[str, str] = {}
    regions: dict[str, RegionMemory] = {}
    for r in names:
        verdicts[r], why[r], regions[r] = judge_region(evidence.regions[r], memory.region(r), config, now)
    in_effect = _restrict(evidence.weights_in_effect, names)
    applied = _restrict(evidence.weights_applied, names) or _restrict(memory.last_applied, names)
    healthy = [r for r in names if verdicts[r] is Verdict.HEALTHY]
    before = in_effect if in_effect is not None else dict(applied or home)
    measured = _normalised(before, home, healthy)
    tick = Tick(evidence, memory, config, now, verdicts, regions, measured, home, measured)
    drifted = in_effect is not None and (reconcile.drift(in_effect, applied) or tick.base != in_effect)
    correct = drifted and config.mode == "automatic" and not tick.backing_off()
    if correct and applied is not None:
        target = reconcile.allowed(tick, tick.base, _normalised(applied, home, healthy))
        tick = Tick(evidence, memory, config, now, verdicts, regions, target, home, measured)
    return Prepared(tick, before, why, in_effect, applied, drifted, correct)


def decide(
    evidence: FleetEvidence, memory: DecisionMemory, config: DecisionConfig, now: datetime
) -> tuple[Decision, DecisionMemory]:
    """The decision for this tick and the memory for the next. Never mutates its inputs."""
    p = prepare(evidence, memory, config, now)
    tick = p.tick
    notes: list[str] = []
    backoff = tick.backing_off()
    if p.in_effect is None:
        notes.append("hold: the weights in effect are unreadable; only safety moves (failover, retreat)")
    if backoff:
        notes.append(f"hold: back-off after a failed apply until {memory.not_before}; only safety moves")
    rules = SAFETY_RULES if p.in_effect is None or backoff else SAFETY_RULES + BALANCE_RULES
    outcome = next((o for rule in rules if (o := rule(tick, notes)) is not None), None)
    drift_words = reconcile.describe(p.in_effect or {}, p.applied or tick.base)
    if outcome is None and p.drifted:
        outcome = Outcome(
            reconcile.RULE,
            "reconcile",
            dict(tick.base),
            [
                drift_words
                + (
                    "; re-asserted"
                    if p.correct
                    else f"; {'back-off' if backoff else config.mode}: reported, not corrected"
                )
            ],
            advisory=not p.correct,
        )
    elif outcome is None:
        outcome = Outcome("hold", "hold", dict(tick.base), notes or ["hold: nothing to move"])
    elif p.correct:
        outcome.reasons.insert(0, drift_words + "; re-asserted")
    return _decision(tick, p.before, outcome, p.why), _remember(tick, outcome)


def _decision(tick: Tick, before: dict[str, int], outcome: Outcome, why: dict[str, str]) -> Decision:
    points = tick.points
    figures: dict[str, dict[str, float | int | str]] = {}
    for r, ev in tick.evidence.regions.items():
        row: dict[str, float | int | str] = {
            "verdict": tick.verdicts[r].value,
            "why": why[r],
            "weight_before": before[r],
            "weight_after": outcome.weights[r],
            "home_weight": tick.home[r],
        }
        if r in points:
            row["usable_points"] = round(points[r], 3)
        if ev.capacity is not None:
            row.update(ready=ev.capacity.ready, loading=ev.capacity.loading, desired=ev.capacity.desired)
            if ev.capacity.load is not None:
                row["load"] = ev.capacity.load
        figures[r] = row
    suspect = any(m.consecutive_failures > 0 and m.verdict is not Verdict.DOWN for m in tick.regions.values())
    recovering = any(v is Verdict.RECOVERING for v in tick.verdicts.values())
    return Decision(
        action=outcome.action,
        weights_before=dict(before),
        weights_after=dict(outcome.weights),
        verdicts=dict(tick.verdicts),
        reasons=list(outcome.reasons),
        rule=outcome.rule,
        evidence=figures,
        urgent=outcome.urgent or suspect or recovering,
        superseded=list(outcome.superseded),
        advisory=outcome.advisory,
    )


def _remember(tick: Tick, outcome: Outcome) -> DecisionMemory:
    regions = {}
    for r, mem in tick.regions.items():
        update: dict[str, Any] = {}
        if tick.verdicts[r] is Verdict.HEALTHY and r not in outcome.region_updates:
            update["last_step_pct"] = 0  # the last step met a HEALTHY tick: nothing to retreat
        if not outcome.advisory:
            update.update(outcome.region_updates.get(r, {}))
            change = outcome.weights[r] - tick.base[r]
            direction = (change > 0) - (change < 0)
            if direction != 0 and direction != mem.last_direction:
                update.update(last_direction=direction, last_direction_change_at=tick.now)
        regions[r] = mem.model_copy(update=update)
    fleet: dict[str, Any] = (
        {} if outcome.advisory else {"last_applied": dict(outcome.weights), **outcome.fleet_updates}
    )
    if tick.evidence.loads_steady:
        fleet["load_per_point"] = tick.read_per_point
    return tick.memory.model_copy(
        update={"regions": regions, "decisions": tick.memory.decisions + 1, **fleet}
    )
