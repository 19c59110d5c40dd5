"""Builders of evidence for the decision core's unit tests: one healthy region, then what differs."""

from __future__ import annotations

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
    decide,
)
from drctl.decision.invariants import check_decision

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
