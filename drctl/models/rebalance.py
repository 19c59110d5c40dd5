"""The Rebalance operation's input and result: one step of a shed or a return of share, as planned
by the monitor (`plan_rebalance` in drctl/models/capacity.py), applied by `workflows.rebalance`."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from drctl.config.capacity import SloConfig
from drctl.models.fleet_spec import FleetSpec
from drctl.models.phases import PhaseTiming
from drctl.models.traffic import GlobalChange

RebalanceStatus = Literal["succeeded", "rolled_back", "stale", "preempted", "failed"]


class RebalanceInput(BaseModel):
    spec: FleetSpec
    action: Literal["shed", "return"]
    weights_before: dict[str, int] = Field(description="The weights the plan was made from.")
    weights_after: dict[str, int] = Field(description="The weights this step sets.")
    prescale: dict[str, int] = Field(
        default_factory=dict, description="Region -> replicas wanted before the shift (HPA minReplicas too)."
    )
    reason: str = ""
    initiator: str = "monitor"

    @property
    def gaining(self) -> list[str]:
        """Regions this step gives share to, the most first."""
        up = {r: w - self.weights_before.get(r, 0) for r, w in self.weights_after.items()}
        return sorted((r for r, d in up.items() if d > 0), key=lambda r: (-up[r], r))


class RebalanceResult(BaseModel):
    status: RebalanceStatus
    action: Literal["shed", "return"]
    weights_before: dict[str, int] = Field(default_factory=dict, description="As read when the step began.")
    weights_after: dict[str, int] = Field(default_factory=dict, description="In effect when it ended.")
    scaled: dict[str, int] = Field(
        default_factory=dict, description="Regions pre-scaled, to how many replicas."
    )
    changes: list[GlobalChange] = Field(default_factory=list, description="Every global weight change made.")
    analysis: list[str] = Field(
        default_factory=list, description="Return: what the probe after the step saw."
    )
    phases: list[PhaseTiming] = Field(default_factory=list)
    error: str | None = None


class RebalanceMemory(BaseModel):
    """What the monitor's rebalance ticks carry across continue-as-new (in MonitorState)."""

    samples: dict[str, Any] = Field(
        default_factory=dict,
        description="Region -> the previous cumulative sample its signals were read from.",
    )
    breach_since: dict[str, datetime] = Field(
        default_factory=dict, description="Region -> since when it breaches the objective, tick after tick."
    )
    shed_since: datetime | None = Field(None, description="Since when the plan has asked for the same shed.")
    ticks: int = 0
    last_tick_at: datetime | None = None

    def track_breaches(
        self, now_breaching: dict[str, list[str]], at: datetime, window_s: float
    ) -> dict[str, list[str]]:
        """Record who breaches now; return those whose breach has lasted `window_s` (the rule's input).

        A region that stops breaching for one tick starts its window again: only a sustained breach sheds.
        """
        self.breach_since = {r: self.breach_since.get(r, at) for r in now_breaching}
        return {
            r: why
            for r, why in now_breaching.items()
            if (at - self.breach_since[r]).total_seconds() >= window_s
        }

    def shed_due(self, planned: bool, at: datetime, window_s: float) -> bool:
        """A shed planned on capacity alone is applied once the plan has asked for it for `window_s`."""
        if not planned:
            self.shed_since = None
            return False
        self.shed_since = self.shed_since or at
        return (at - self.shed_since).total_seconds() >= window_s


def slo_breaches(ttft_p99_ms: float | None, error_rate: float | None, slo: SloConfig) -> list[str]:
    """Why a region breaches the objective now (empty: within it, or no traffic to tell)."""
    out = []
    if ttft_p99_ms is not None and ttft_p99_ms > slo.ttft_p99_ms:
        out.append(f"TTFT p99 {ttft_p99_ms:.0f} ms > objective {slo.ttft_p99_ms:g} ms")
    if error_rate is not None and error_rate > slo.error_rate:
        out.append(f"error rate {error_rate:.1%} > objective {slo.error_rate:.1%}")
    return out
