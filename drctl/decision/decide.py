"""The decision function: evidence and memory in, a decision and the new memory out.

The verdicts come first (drctl/decision/verdict.py); then the weights to start from (those in
effect, or those applied when the tier cannot be read or has drifted and mode is automatic); then
the rules in priority order, the first that fires deciding (docs/decisions.md, Rules).
"""

from __future__ import annotations

from collections.abc import Callable
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


def _normalised(weights: dict[str, int], home: dict[str, int]) -> dict[str, int]:
    """Weights summing to 100: scaled if they do not; the home weights if they are all zero."""
    if sum(weights.values()) == 100:
        return dict(weights)
    if sum(weights.values()) <= 0:
        return dict(home)
    return largest_remainder({r: float(w) for r, w in weights.items()})


def decide(
    evidence: FleetEvidence, memory: DecisionMemory, config: DecisionConfig, now: datetime
) -> tuple[Decision, DecisionMemory]:
    """The decision for this tick and the memory for the next. Never mutates its inputs."""
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
    before = in_effect if in_effect is not None else dict(applied or home)
    tick = Tick(
        evidence,
        memory,
        config,
        now,
        verdicts,
        regions,
        _normalised(before, home),
        home,
        in_effect is not None,
    )
    notes: list[str] = []
    backoff = tick.backing_off()
    drifted = in_effect is not None and (reconcile.drift(in_effect, applied) or tick.base != in_effect)
    correct = drifted and config.mode == "automatic" and not backoff
    target = (
        reconcile.allowed(tick, tick.base, _normalised(applied, home)) if applied is not None else tick.base
    )
    if correct:
        tick = Tick(evidence, memory, config, now, verdicts, regions, target, home, True)
    if in_effect is None:
        notes.append("hold: the weights in effect are unreadable; only safety moves (failover, retreat)")
    if backoff:
        notes.append(f"hold: back-off after a failed apply until {memory.not_before}; only safety moves")
    rules = SAFETY_RULES if in_effect is None or backoff else SAFETY_RULES + BALANCE_RULES
    outcome = next((o for rule in rules if (o := rule(tick, notes)) is not None), None)
    drift_words = reconcile.describe(in_effect, applied or tick.base) if in_effect is not None else ""
    if outcome is None and drifted:
        outcome = Outcome(
            reconcile.RULE,
            "reconcile",
            target,
            [drift_words + ("; re-asserted" if correct else f"; {config.mode}: reported, not corrected")],
            advisory=not correct,
        )
    elif outcome is None:
        outcome = Outcome("hold", "hold", dict(tick.base), notes or ["hold: nothing to move"])
    elif correct:
        outcome.reasons.insert(0, drift_words + "; re-asserted")
    return _decision(tick, before, outcome, why), _remember(tick, outcome)


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
    fleet = {} if outcome.advisory else {"last_applied": dict(outcome.weights), **outcome.fleet_updates}
    return tick.memory.model_copy(
        update={"regions": regions, "decisions": tick.memory.decisions + 1, **fleet}
    )
