"""Builders of evidence for the decision core's unit tests: one healthy region, then what differs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from drctl.decision import (
    CapacityFacts,
    Decision,
    DecisionConfig,
    DecisionMemory,
    FleetEvidence,
    PassiveFacts,
    ProbeFacts,
    RegionEvidence,
    RegionMemory,
    decide,
)
from drctl.decision.decide import prepare
from drctl.decision.invariants import check_decision, check_trace
from drctl.decision.tick import Tick

T0 = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def probe(**kw: Any) -> ProbeFacts:
    """A probe that saw the region answer every completion."""
    base: dict[str, Any] = {
        "answered": True,
        "completions_ok": 2,
        "completions_tried": 2,
        "ttft_ms": 50.0,
        "at": T0,
    }
    return ProbeFacts(**{**base, **kw})


def dead() -> ProbeFacts:
    return probe(answered=False, completions_ok=0, errors=["refused"], ttft_ms=None)


def capacity(
    ready: int = 2, load: float | None = 8.0, per_replica: float | None = 10.0, **kw: Any
) -> CapacityFacts:
    base: dict[str, Any] = {"ready": ready, "desired": 2, "per_replica": per_replica, "load": load}
    return CapacityFacts(**{**base, **kw})


def region(name: str, home: int, **kw: Any) -> RegionEvidence:
    base: dict[str, Any] = {"name": name, "home_weight": home, "probe": probe(), "capacity": capacity()}
    return RegionEvidence(**{**base, **kw})


def fleet(regions: list[RegionEvidence], weights: dict[str, int] | None = None, **kw: Any) -> FleetEvidence:
    w = weights if weights is not None else {r.name: r.home_weight for r in regions}
    base: dict[str, Any] = {
        "at": T0,
        "regions": {r.name: r for r in regions},
        "weights_in_effect": w,
        "weights_applied": w,
    }
    return FleetEvidence(**{**base, **kw})


def passive(**kw: Any) -> PassiveFacts:
    return PassiveFacts(**kw)


def checked(
    evidence: FleetEvidence, memory: DecisionMemory, config: DecisionConfig, now: datetime
) -> tuple[Decision, DecisionMemory]:
    """`decide`, asserting every per-decision invariant of its result."""
    decision, new = decide(evidence, memory, config, now)
    assert check_decision(evidence, decision, config) == [], decision
    return decision, new


def applied(evidence: FleetEvidence, weights: dict[str, int]) -> FleetEvidence:
    """The evidence after the caller applied `weights` (in effect and applied alike)."""
    return evidence.model_copy(update={"weights_in_effect": dict(weights), "weights_applied": dict(weights)})


Step = tuple[FleetEvidence, Decision]


def run(
    config: DecisionConfig,
    evidence_at: Callable[[int, dict[str, int]], FleetEvidence],
    ticks: int,
    weights: dict[str, int],
    memory: DecisionMemory | None = None,
) -> list[Step]:
    """Tick `ticks` times, every `config.interval_s`: build the evidence from the weights in effect,
    decide, check the per-decision invariants, apply what is not advisory. The trace invariants are
    checked at the end."""
    mem = memory or DecisionMemory()
    steps: list[Step] = []
    for i in range(ticks):
        ev = evidence_at(i, dict(weights)).model_copy(update={"at": at(i * config.interval_s)})
        decision, mem = checked(ev, mem, config, ev.at)
        steps.append((ev, decision))
        if not decision.advisory:
            weights = dict(decision.weights_after)
    assert check_trace(steps, config) == []
    return steps


def loaded(
    name: str, home: int, weights: dict[str, int], total_load: float, ready: int = 2, **kw: Any
) -> RegionEvidence:
    """A region whose load follows its weight in effect (per-replica capacity 15, usable 12 each)."""
    cap = capacity(ready=ready, load=total_load * weights[name] / 100, per_replica=15.0)
    return region(name, home, **{"capacity": cap, **kw})


def tick_of(
    evidence: FleetEvidence, config: DecisionConfig, now: datetime, memory: DecisionMemory | None = None
) -> Tick:
    """The judged tick the rules see for `evidence`."""
    return prepare(evidence, memory or DecisionMemory(), config, now).tick


def remembered(**regions: dict[str, Any]) -> DecisionMemory:
    """A memory with the given per-region fields."""
    return DecisionMemory(regions={r: RegionMemory(**kw) for r, kw in regions.items()})


W3 = {"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20}


def three_regions(i: int, w: dict[str, int]) -> FleetEvidence:
    """The issue's three-region case under 40 streams: us-west-1 loses one of its two replicas at
    tick 1, us-east-1 dies at tick 4."""
    east = {"probe": dead()} if i >= 4 else {}
    return fleet(
        [
            loaded("us-west-1", 50, w, 40, ready=1 if i >= 1 else 2),
            loaded("us-east-1", 30, w, 40, **east),
            loaded("eu-west-1", 20, w, 40),
        ],
        w,
    )
