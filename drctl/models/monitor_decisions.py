"""The monitor's decisions with their evidence, and the compact log that keeps them per fleet.

Every tick the monitor decides where traffic goes (shed, return, hold, fail over) and builds a
`Decision` naming why: capacity figures, signal values, thresholds and quorum votes. The latest one
is always shown (the `decisions` query, the UI details); the `DecisionLog` keeps only what an
operator needs at 3 a.m.: an entry when the decision changes, plus a "held because ..." entry at most
every `held_every_s` while nothing changes, the last `max_entries` of them. So it is bounded in
size whatever the tick rate, and it rides in MonitorState across continue-as-new. Pure, no Temporal.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

Figure = float | int | str
DecisionAction = Literal["shed", "return", "hold", "failover", "failback", "reconcile"]
DecisionOutcome = Literal["applied", "advised", "recorded", "held", "failed", "started"]


class Decision(BaseModel):
    """One decision about where traffic goes, with every figure it was made from."""

    at: datetime
    action: DecisionAction
    mode: str = Field(description="failover.rebalance (off|advise|automatic), or the policy for a failover.")
    outcome: DecisionOutcome
    weights_before: dict[str, int] = Field(default_factory=dict)
    weights_after: dict[str, int] = Field(default_factory=dict)
    moved_pct: int = Field(0, description="Share of the total weight the step moves, %.")
    reasons: list[str] = Field(default_factory=list, description="Why: the rule's own words.")
    held_back: list[str] = Field(
        default_factory=list, description="What was capped or skipped, and why (no headroom, min step...)."
    )
    evidence: dict[str, dict[str, Figure]] = Field(
        default_factory=dict, description="Per region: capacity, load, headroom and the signal values used."
    )
    thresholds: dict[str, Figure] = Field(
        default_factory=dict, description="The objective and limits applied."
    )
    votes: dict[str, str] = Field(default_factory=dict, description="Quorum views, vantage -> view.")
    error: str | None = None

    def signature(self) -> tuple[str, str, tuple[tuple[str, int], ...], tuple[str, ...]]:
        """What makes two decisions "the same": action, outcome, target weights and the regions named as
        held back. Figures and wording are left out, or every tick's new numbers would be a change."""
        held = tuple(sorted({h.split(" ", 1)[0] for h in self.held_back}))
        return (self.action, self.outcome, tuple(sorted(self.weights_after.items())), held)

    def line(self) -> str:
        """One line for a terminal or the UI."""
        moved = ""
        if self.weights_after and self.weights_after != self.weights_before:
            moved = f" {_fmt(self.weights_before)} → {_fmt(self.weights_after)}"
        why = "; ".join(self.reasons + self.held_back) or "no reason recorded"
        err = f" ({self.error})" if self.error else ""
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.action} [{self.mode}, {self.outcome}]{moved}: {why}{err}"


def _fmt(w: dict[str, int]) -> str:
    return "/".join(f"{r} {v}" for r, v in w.items())


class DecisionLog(BaseModel):
    """The last decisions of one fleet: bounded, written on change and periodically while holding."""

    entries: list[Decision] = Field(default_factory=list, description="Oldest first.")
    latest: Decision | None = Field(None, description="The last decision made, logged or not.")
    max_entries: int = Field(50, ge=1, le=1000)
    held_every_s: float = Field(300.0, gt=0, description="A hold is logged again after this long, s.")
    unchanged: int = Field(0, description="Decisions since the last entry that changed nothing.")
    dropped: int = Field(0, description="Entries dropped off the front since the monitor started.")

    def record(self, d: Decision) -> bool:
        """Keep `d` as the latest; log it when it differs from the last entry, or when the last entry
        is a hold older than `held_every_s`. Returns whether it was logged."""
        self.latest = d
        last = self.entries[-1] if self.entries else None
        due = (
            last is None
            or last.signature() != d.signature()
            or (d.action == "hold" and (d.at - last.at).total_seconds() >= self.held_every_s)
        )
        if not due:
            self.unchanged += 1
            return False
        self.unchanged = 0
        self.entries.append(d)
        if len(self.entries) > self.max_entries:
            cut = len(self.entries) - self.max_entries
            del self.entries[:cut]
            self.dropped += cut
        return True


class DecisionsView(BaseModel):
    """What the monitor's `decisions` query answers (and `drctl monitor decisions` prints)."""

    fleet: str
    rebalance: str = Field(description="failover.rebalance as the monitor runs it.")
    latest: Decision | None = None
    entries: list[Decision] = Field(default_factory=list)
    unchanged: int = 0
    dropped: int = 0
