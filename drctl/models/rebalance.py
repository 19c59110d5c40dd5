"""The Rebalance operation's input and result: one step of a shed or a return of share, as planned
by the monitor (`plan_rebalance` in drctl/models/capacity.py), applied by `workflows.rebalance`; and
what the monitor's rebalance ticks remember between them."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from drctl.models.capacity import BreachState, RegionCapacity
from drctl.models.capacity_sample import CapacitySample
from drctl.models.fleet_spec import FleetSpec
from drctl.models.gitops import GITOPS_DESCRIPTION, GitOpsManaged, gitops_field
from drctl.models.phases import PhaseTiming
from drctl.models.traffic import GlobalChange

RebalanceStatus = Literal["succeeded", "rolled_back", "stale", "preempted", "failed"]


class RebalanceInput(BaseModel):
    spec: FleetSpec
    # reconcile: the monitor's tier watch puts back weights set outside drctl (workflows/monitor_tier.py).
    action: Literal["shed", "return", "reconcile"]
    weights_before: dict[str, int] = Field(description="The weights the plan was made from.")
    weights_after: dict[str, int] = Field(description="The weights this step sets.")
    prescale: dict[str, int] = Field(
        default_factory=dict, description="Region -> replicas wanted before the shift (HPA minReplicas too)."
    )
    scale_back: dict[str, int] = Field(
        default_factory=dict,
        description="The last return step: region -> the replicas it goes back to, for the regions earlier "
        "steps pre-scaled (only if they still run more).",
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
    action: Literal["shed", "return", "reconcile"]
    weights_before: dict[str, int] = Field(default_factory=dict, description="As read when the step began.")
    weights_after: dict[str, int] = Field(default_factory=dict, description="In effect when it ended.")
    scaled: dict[str, int] = Field(
        default_factory=dict, description="Regions pre-scaled, to how many replicas."
    )
    scaled_back: dict[str, int] = Field(
        default_factory=dict, description="The last return step: regions scaled back, to how many replicas."
    )
    gitops_managed: list[GitOpsManaged] = Field(default_factory=gitops_field, description=GITOPS_DESCRIPTION)
    scale_back_errors: dict[str, str] = Field(
        default_factory=dict, description="Regions whose scale-back failed, and why (still pre-scaled)."
    )
    prescale_errors: dict[str, str] = Field(
        default_factory=dict, description="Regions whose pre-scale failed, and why (the shift stands)."
    )
    changes: list[GlobalChange] = Field(default_factory=list, description="Every global weight change made.")
    analysis: list[str] = Field(
        default_factory=list, description="Return: what the probe after the step saw."
    )
    phases: list[PhaseTiming] = Field(default_factory=list)
    error: str | None = None


class RebalanceMemory(BaseModel):
    """What the monitor's rebalance ticks carry across continue-as-new (in MonitorState)."""

    samples: dict[str, CapacitySample] = Field(
        default_factory=dict,
        description="Region -> the previous cumulative sample its signals were read from.",
    )
    breaches: BreachState = Field(
        default_factory=BreachState, description="Since when each region breaches what, tick after tick."
    )
    ceilings: dict[str, float] = Field(
        default_factory=dict, description="Region -> the learned per-replica slot ceiling last seen."
    )
    moved: dict[str, int] = Field(
        default_factory=dict,
        description="Region -> net weight the rebalance moved onto it (negative: shed off it): only this returns.",
    )
    last_set: dict[str, int] | None = Field(None, description="The weights the last applied step set.")
    prescaled: list[str] = Field(
        default_factory=list,
        description="Regions a shed pre-scaled: the step that returns the last moved share scales them back.",
    )
    not_before: datetime | None = Field(None, description="After a failed step: no other step before this.")
    not_before_shed: bool = Field(
        True,
        description="Whether `not_before` holds sheds too (a failed shed), or only returns (a failed return).",
    )
    next_shed_at: datetime | None = Field(None, description="After a shed step: no other shed before this.")
    return_since: datetime | None = Field(
        None, description="Since when every tick has planned a return (return_stable_s counts from here)."
    )
    ticks: int = 0
    points: dict[str, float] = Field(
        default_factory=dict,
        description="Region -> the share (weight points) it can carry within its usable capacity, at the "
        "last tick that read the load (`weight_points`): where the monitor's failover places a failed "
        "region's share. Empty while no load is read.",
    )

    def home(self, current: dict[str, int]) -> tuple[dict[str, int], str | None]:
        """The weights the rebalance returns toward: the current ones less what it moved itself.

        Weights that are not the ones its last step set were moved by someone else (a failover,
        an operator): the rebalance then forgets its own moves and takes them as they are, so it
        never undoes another operation. Returns (home, why it forgot, or None).
        """
        if self.last_set is not None and current != self.last_set:
            # Another operation owns the weights, and the replicas with them (a failback scales back).
            self.moved, self.last_set, self.prescaled = {}, None, []
            return dict(current), "the weights were changed by another operation: taken as they are"
        return {r: w - self.moved.get(r, 0) for r, w in current.items()}, None

    def applied(self, before: dict[str, int], after: dict[str, int]) -> None:
        """Record a step the rebalance applied."""
        for r in after:
            self.moved[r] = self.moved.get(r, 0) + after[r] - before.get(r, 0)
        self.moved = {r: d for r, d in self.moved.items() if d != 0}
        self.last_set = dict(after)


# Less load than this says nothing of what a weight point weighs (an idle fleet).
MIN_LOAD = 1e-6


def weight_points(caps: dict[str, RegionCapacity], weights: dict[str, int]) -> dict[str, float]:
    """Region -> the weight points its usable capacity carries, for every region whose capacity is
    known. A point brings the load the known regions carry over their weights in effect; with no
    load read there (an idle fleet, or no region known with share), no figure: empty."""
    known = {r: c for r, c in caps.items() if c.known}
    weight = sum(weights.get(r, 0) for r in known)
    load = sum(c.load for r, c in known.items() if weights.get(r, 0) > 0)
    if weight <= 0 or load < MIN_LOAD:
        return {}
    per_point = load / weight
    return {r: c.usable / per_point for r, c in known.items()}
