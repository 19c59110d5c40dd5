"""What every mutating operation shares with the CLI: the handler names, the phases, the progress view.

`drctl ops` drives any operation alike through these names; the phases are written to DrctlPhase.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

# ApplicationError.type raised when another mutating operation already holds the fleet.
FLEET_BUSY = "FleetBusy"

# Handler names every mutating workflow offers, so `drctl ops` drives any of them alike.
QUERY_PROGRESS = "progress"
UPDATE_APPROVE = "approve"
UPDATE_REJECT = "reject"
UPDATE_ABORT = "abort"

# Phases written to DrctlPhase (operations add their own; these are the shared ones).
PHASE_PENDING = "pending"
PHASE_CLAIM = "claim"
PHASE_PREFLIGHT = "preflight"
PHASE_AWAITING_APPROVAL = "awaiting-approval"
PHASE_SCALE = "scale"
PHASE_SHIFT = "shift"
PHASE_VERIFY = "verify"
PHASE_PROPAGATE = "propagate"  # verified, waiting for the global change to be INSYNC (Route 53)
PHASE_COMPENSATE = "compensate"
PHASE_DONE = "done"
PHASE_FAILED = "failed"


class OperationInfo(BaseModel):
    """A running (or recent) operation as visibility reports it."""

    workflow_id: str
    run_id: str | None = None
    operation: str
    fleet: str
    phase: str | None = None
    source: str | None = None
    target: str | None = None
    status: str = "RUNNING"
    start_time: datetime | None = None
    ui_link: str | None = None
    initiator: str | None = Field(None, description="Who started it (DrctlInitiator); None: not recorded.")


class PhaseTiming(BaseModel):
    phase: str
    started_at: datetime
    ended_at: datetime | None = None
    duration_s: float | None = None


class OperationProgress(BaseModel):
    """What the `progress` query returns: enough for the CLI's live view."""

    operation: str
    phase: str
    details: str = ""
    awaiting_approval: bool = False
    phases: list[PhaseTiming] = Field(default_factory=list)


class ApproveInput(BaseModel):
    approver: str = Field("operator", description="Who approved, for the audit trail.")
    comment: str = ""


class RejectInput(BaseModel):
    """Body of the `reject` update: the approval gate is closed, and the operation ends aborted."""

    by: str = Field(min_length=1, description="Who rejected, for the audit trail.")
    reason: str = Field("rejected", min_length=1)


def same_identity(a: str, b: str) -> bool:
    """Whether two recorded identities name the same principal (case and padding aside): four eyes."""
    return a.strip().casefold() == b.strip().casefold()


class AbortInput(BaseModel):
    reason: str = Field("aborted by operator", min_length=1)
    by: str = "operator"
