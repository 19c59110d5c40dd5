"""What the core remembers between ticks, carried by the monitor across continue-as-new.

Small and bounded: a few fields per configured region and a few for the fleet.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from drctl.decision.evidence import Verdict


class RegionMemory(BaseModel):
    """One region's hysteresis and movement history."""

    model_config = ConfigDict(extra="forbid")

    verdict: Verdict = Field(Verdict.HEALTHY, description="The verdict of the last tick.")
    since: datetime | None = Field(None, description="When the current verdict began; None: before memory.")
    consecutive_failures: int = Field(0, ge=0, description="Failed ticks in a row.")
    consecutive_successes: int = Field(0, ge=0, description="Passed ticks in a row.")
    last_direction: Literal[-1, 0, 1] = Field(0, description="Direction of the last change of its weight.")
    last_direction_change_at: datetime | None = Field(None, description="When that direction began.")
    breach_since: datetime | None = Field(None, description="When its current capacity breach began.")
    emptied_by: Literal["failover", "shed"] | None = Field(
        None, description="Why it is below its home weight: failback or return brings it back."
    )
    last_step_pct: int = Field(0, ge=0, le=100, description="Share its last failback or return step gave it.")
    last_finished: float | None = Field(
        None, description="Requests its replicas had finished at the last probe: progress needs two reads."
    )


class DecisionMemory(BaseModel):
    """The core's whole memory."""

    model_config = ConfigDict(extra="forbid")

    regions: dict[str, RegionMemory] = Field(default_factory=dict, description="Region name -> memory.")
    last_applied: dict[str, int] | None = Field(None, description="The weights of the last decision.")
    next_shed_at: datetime | None = Field(None, description="No shed step before this.")
    not_before: datetime | None = Field(None, description="Back-off after a failed apply: only safety moves.")
    load_per_point: float | None = Field(
        None,
        ge=0,
        description="The load one weight point brought at the last tick whose loads were read under "
        "steady weights: what capacity in points is figured from while the loads are not steady.",
    )
    decisions: int = Field(0, ge=0, description="Decisions made.")

    def region(self, name: str) -> RegionMemory:
        """The memory of `name`, a fresh one if the region is new."""
        return self.regions.get(name) or RegionMemory()


def note_apply_failed(memory: DecisionMemory, now: datetime, backoff_s: float) -> DecisionMemory:
    """The memory after the caller failed to apply a decision: non-safety moves wait `backoff_s`."""
    return memory.model_copy(update={"not_before": now + timedelta(seconds=backoff_s)}, deep=True)
