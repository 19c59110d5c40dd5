"""What every rule reads (`Tick`) and what a rule that fires returns (`Outcome`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from drctl.decision.config import DecisionConfig
from drctl.decision.decision import Action
from drctl.decision.evidence import FleetEvidence, Verdict
from drctl.decision.headroom import load_per_point, place, points_at
from drctl.decision.memory import DecisionMemory, RegionMemory

# Regions whose read load says nothing of the load their share offers.
NOT_ANSWERING = frozenset({Verdict.DOWN, Verdict.UNKNOWN})


@dataclass(frozen=True)
class Tick:
    """One tick's judged state: the rules' only input."""

    evidence: FleetEvidence
    memory: DecisionMemory
    config: DecisionConfig
    now: datetime
    verdicts: dict[str, Verdict]
    regions: dict[str, RegionMemory]  # this tick's region memories (verdicts updated)
    base: dict[str, int]  # the weights the rules start from (sum 100)
    home: dict[str, int]  # configured weights, as shares summing to 100
    measured: dict[str, int]  # the weights the loads were read under (those in effect, sum 100)

    @property
    def read_per_point(self) -> float | None:
        """The load one weight point brings, from this tick's loads (None when unknown). Only a fact
        when the loads are steady: read while the weights changed, they mix two weightings."""
        answering = [r for r, v in self.verdicts.items() if v not in NOT_ANSWERING]
        return load_per_point(self.evidence.regions, self.measured, answering)

    @property
    def per_point(self) -> float | None:
        """This tick's load per point; while the loads are not steady, the last steady tick's."""
        return self.read_per_point if self.evidence.loads_steady else self.memory.load_per_point

    @property
    def points(self) -> dict[str, float]:
        """Region -> usable capacity in weight points, where known."""
        return points_at(self.evidence.regions, self.per_point, self.config)

    def serving(self) -> list[str]:
        """Regions with share that are not DOWN."""
        return [r for r, w in self.base.items() if w > 0 and self.verdicts[r] is not Verdict.DOWN]

    def receivers(self, exclude: set[str], *, stable: bool = True) -> list[str]:
        """Regions that may be given share: HEALTHY; SATURATED too when every serving region
        (those excluded aside) is SATURATED. With `stable`, not one whose weight fell within the
        stability window (it would change direction)."""
        candidates = [r for r in self.base if r not in exclude]
        serving = [r for r in self.serving() if r not in exclude]
        all_saturated = bool(serving) and all(self.verdicts[r] is Verdict.SATURATED for r in serving)
        ok = {Verdict.HEALTHY, Verdict.SATURATED} if all_saturated else {Verdict.HEALTHY}
        out = [r for r in candidates if self.verdicts[r] in ok]
        if stable:
            out = [r for r in out if not self.turning(r, +1)]
        return sorted(out)

    def turning(self, region: str, direction: int) -> bool:
        """Whether moving `region` in `direction` would change its direction within the window."""
        mem = self.regions[region]
        if mem.last_direction in (0, direction) or mem.last_direction_change_at is None:
            return False
        window = timedelta(seconds=self.config.stability_window_s)
        return self.now - mem.last_direction_change_at < window

    def backing_off(self) -> bool:
        """Whether a failed apply's back-off still holds non-safety moves."""
        return self.memory.not_before is not None and self.now < self.memory.not_before

    def how(self, amount: float, receivers: list[str]) -> str:
        """How `spread` places `amount` over `receivers`, in words for the reasons."""
        points = self.points
        if not all(r in points for r in receivers):
            return "by home weight, within known capacity"
        room = sum(max(0.0, points[r] - self.base[r]) for r in receivers)
        return "by headroom" if amount <= room else f"past their headroom ({room:.0f}), evenly by capacity"

    def move(self, amounts: dict[str, float], receivers: list[str]) -> dict[str, int]:
        """The base weights with `amounts` taken off their regions and spread over `receivers`."""
        return place(self.base, amounts, receivers, self.points, self.home)


@dataclass
class Outcome:
    """A rule that fired: the decision's action, target weights and words, and memory updates."""

    rule: str
    action: Action
    weights: dict[str, int]
    reasons: list[str]
    urgent: bool = False
    advisory: bool = False
    superseded: list[str] = field(default_factory=list)
    region_updates: dict[str, dict[str, Any]] = field(default_factory=dict)
    fleet_updates: dict[str, Any] = field(default_factory=dict)


def fmt(weights: dict[str, int]) -> str:
    """Weights in one short line: 'a 60 / b 40'."""
    return " / ".join(f"{r} {w}" for r, w in weights.items())
