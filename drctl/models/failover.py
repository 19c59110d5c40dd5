"""Failover and failback models, and the pure logic they share (weights).

The logic lives next to the models, free of Temporal, so the workflows, the CLI's dry run and the
unit tests all compute the same plan. The failover plan itself (weights, capacity) is in
failover_plan.py and re-exported here; the monitor's models are in monitor.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from drctl.models.activity_io import VerifyResult
from drctl.models.failover_plan import (  # noqa: F401  (re-exported: the failover models' one import path)
    WEIGHT_CAP,
    FailoverPlan,
    ReceiverReplicas,
    cap_weights,
    capacity_of,
    plan_failover,
    plan_receivers,
    probe_passes,
    receivers_to_size,
    shift_weights,
    target_problem,
)
from drctl.models.fleet_spec import FleetSpec
from drctl.models.gitops import GITOPS_DESCRIPTION, GitOpsManaged, gitops_field
from drctl.models.phases import PhaseTiming
from drctl.models.rpo import DataLossExposure
from drctl.models.traffic import GlobalChange

# --- pure plan logic ---------------------------------------------------------------------------


def failback_plan(current: dict[str, int], configured: dict[str, int], steps: int) -> list[dict[str, int]]:
    """Linear steps from current to configured weights; the last step is exactly configured."""
    plan: list[dict[str, int]] = []
    for i in range(1, steps + 1):
        frac = i / steps
        step = {r: round(current.get(r, 0) + (w - current.get(r, 0)) * frac) for r, w in configured.items()}
        if sum(step.values()) <= 0:
            continue
        if not plan or plan[-1] != step:
            plan.append(step)
    if not plan or plan[-1] != configured:
        plan.append(dict(configured))
    return plan


# --- failover ----------------------------------------------------------------------------------


class FailoverInput(BaseModel):
    spec: FleetSpec
    target: str
    source: str | None = Field(
        None, description="Default: every other region with weight moves to the target."
    )
    emergency: bool = Field(False, description="Shift first, scale after (the source is already failing).")
    force: bool = Field(
        False, description="Skip the refusals: target health, capacity, replication lag, model drift."
    )
    require_approval: bool | None = Field(None, description="Override the fleet's approval policy.")
    fault_at: datetime | None = Field(
        None, description="Detection or fault time for the RTO; default: start."
    )
    last_good_at: datetime | None = Field(None, description="Last good probe before the fault, if known.")
    initiator: str = "cli"
    reason: str = ""
    receivers: list[str] = Field(
        default_factory=list,
        description="The monitor's failover: the source's share is spread over these regions as the decision "
        "core places it (drctl/decision/headroom.py `place`: by headroom where `capacity_points` knows every "
        "receiver, else by configured weight, none past its known capacity). The target is one of them and "
        "runs the steps. Empty: the whole share goes to the target (an operator's --to).",
    )
    capacity_points: dict[str, float] = Field(
        default_factory=dict, description="Region -> the weight points its usable capacity carries."
    )

    def spread_over(self) -> list[str]:
        """The regions the source's share is spread over: the receivers less the source, when the
        target is one of them; empty: the whole share goes to the target."""
        if self.target not in self.receivers or self.target == self.source:
            return []
        return sorted(set(self.receivers) - {self.source})


class ReceiverScaled(BaseModel):
    """What scaling one receiver of a spread failover came to (not the target: target_replicas)."""

    replicas: int | None = Field(
        None,
        description="Replicas it carries its new share on: scaled to, or already had (plan.receivers_replicas "
        "says which); None: not known, see error.",
    )
    error: str | None = Field(
        None, description="Why not: its capacity read or scale failed. Recorded; the failover goes on."
    )


class FailoverResult(BaseModel):
    status: Literal["succeeded", "unverified", "failed", "refused", "aborted"] = Field(
        description="unverified: traffic shifted and served, but no answer named the serving region."
    )
    source: str | None
    target: str
    plan: FailoverPlan | None = None
    weights_before: dict[str, int] = Field(default_factory=dict)
    weights_after: dict[str, int] = Field(default_factory=dict)
    target_replicas: int | None = None
    receivers_scaled: dict[str, ReceiverScaled] = Field(
        default_factory=dict,
        description="A spread failover: each other receiver scaled for its new share (plan.receivers_replicas), "
        "by region, with any error.",
    )
    gitops_managed: list[GitOpsManaged] = Field(default_factory=gitops_field, description=GITOPS_DESCRIPTION)
    verify: VerifyResult | None = None
    phases: list[PhaseTiming] = Field(default_factory=list)
    started_at: datetime
    fault_at: datetime
    shifted_at: datetime | None = None
    weights_applied_at: datetime | None = Field(None, description="When the global tier accepted the shift.")
    propagated_at: datetime | None = Field(
        None,
        description="When the tier reported the shift in effect everywhere (Route 53 INSYNC); None: not confirmed.",
    )
    changes: list[GlobalChange] = Field(
        default_factory=list, description="Every global weight change made, in order."
    )
    verified_at: datetime | None = None
    rto_s: float | None = Field(None, description="fault_at to verified traffic fully served elsewhere.")
    rto_upper_bound_s: float | None = Field(None, description="From the last good probe, when known.")
    rto_clients_bound_s: float | None = Field(
        None,
        description="DNS global tier (Route 53): fault to the moment every client has the new answer at the "
        "latest: the change in effect everywhere (verified and INSYNC), plus the record's TTL, which a "
        "resolver that cached the old answer just before may keep serving. rto_s is the first resolver "
        "seeing the change; rto_met, the SLO watch and the drill verdict judge rto_s (docs/failover.md).",
    )
    rto_target_s: float
    rto_met: bool | None = None
    slo_restored_s: float | None = Field(
        None,
        description="fault_at to the target meeting objectives.slo (TTFT p99, error rate) under the moved "
        "load, held for its window; None: not restored (or not measured), see slo_evidence.",
    )
    slo_met: bool | None = Field(
        None, description="SLO restored within rto_target_s of the fault; None: not measured."
    )
    slo_evidence: str | None = Field(
        None, description="One line: the figures that held, or what breached (e.g. ttft_p99 412 ms > 200 ms)."
    )
    compensated: Literal["restored_weights", "left_on_target_source_dead", "compensation_failed"] | None = (
        Field(
            None,
            description="After a failure past the shift: what the compensation did "
            "(failed: weights as the shift left them).",
        )
    )
    error: str | None = None
    approved_by: str | None = None
    rejected_by: str | None = Field(
        None, description="Who rejected it at the approval gate (`drctl ops reject`)."
    )
    preempted: list[str] = Field(
        default_factory=list, description="Maintenance operations told to yield to this failover."
    )
    data_loss: DataLossExposure | None = Field(
        None, description="Replication lag accepted (emergency or --force)."
    )
    released_at: datetime | None = Field(
        None,
        description="When the failover gave the fleet back: traffic verified on the target, so the next "
        "decision need not wait for the objective watch.",
    )
    superseded_by: str | None = Field(
        None, description="The operation that ended this failover's objective watch early."
    )


# Signals between failovers and the monitor that started one (docs/lock.md: done for the fleet at
# verification). The failover tells its parent monitor it is verified; a newer failover (the
# monitor's or an operator's) tells a failover that is only watching the objective to stop.
SIGNAL_VERIFIED = "failover_verified"
SIGNAL_SUPERSEDE = "supersede"
QUERY_RELEASED = "released"
MEMO_RELEASED = "released"


class FailoverVerified(BaseModel):
    """From a failover to the monitor that started it: traffic is verified on the target."""

    workflow_id: str
    run_id: str
    source: str
    target: str
    rto_s: float | None = None
    weights_after: dict[str, int] = Field(default_factory=dict)


class SupersedeNotice(BaseModel):
    """To a failover watching its objective: a newer operation takes over; end the watch now."""

    by: str = Field(description="The newer operation's workflow id, or who asked.")
    reason: str = ""


# --- failback ----------------------------------------------------------------------------------


class FailbackInput(BaseModel):
    spec: FleetSpec
    region: str | None = Field(
        None, description="The recovered region; default every region below its weight."
    )
    stabilization_window_s: float | None = Field(
        None, description="Override; the monitor passes 0 (it watched)."
    )
    initiator: str = "cli"


class FailbackResult(BaseModel):
    status: Literal["succeeded", "rolled_back", "failed", "not_needed", "preempted"]
    weights_before: dict[str, int] = Field(default_factory=dict)
    weights_after: dict[str, int] = Field(default_factory=dict)
    steps_done: int = 0
    steps_planned: int = 0
    scaled_back: dict[str, int] = Field(default_factory=dict)
    gitops_managed: list[GitOpsManaged] = Field(default_factory=gitops_field, description=GITOPS_DESCRIPTION)
    changes: list[GlobalChange] = Field(
        default_factory=list, description="Every global weight change made, in order."
    )
    phases: list[PhaseTiming] = Field(default_factory=list)
    error: str | None = None
