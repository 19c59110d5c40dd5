"""Global-tier weight changes as workflows see them: applied, then propagated.

Route 53 accepts a change at once (PENDING) and serves it everywhere later (INSYNC); HAProxy does
both at once. Workflows record both moments, so an operator can tell "drctl changed the weights"
from "every resolver can see them".
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from drctl.models.activity_io import Weights


class WeightsApplied(Weights):
    """set_global_weights' answer: the weights read back after the change, and its propagation state."""

    change_id: str | None = Field(None, description="Route 53 ChangeInfo.Id; None for a synchronous tier.")
    # Default True: a result recorded before this field existed came from an activity that blocked
    # until INSYNC, so it was propagated.
    propagated: bool = True
    status: str = Field("applied", description="PENDING/INSYNC (Route 53) or applied (HAProxy).")


class PropagationInput(BaseModel):
    change_id: str
    timeout_s: float = Field(gt=0, description="Give up waiting (not the change) after this long.")
    poll_s: float = Field(2.0, gt=0, description="Seconds between GetChange calls.")


class PropagationResult(BaseModel):
    change_id: str
    propagated: bool
    status: str = Field(description="Last status the tier reported.")
    waited_s: float
    polls: int = Field(description="Status calls made (GetChange for Route 53).")
    last_error: str | None = Field(None, description="Last transient error while polling, if any.")


class GlobalChange(BaseModel):
    """One global weight change an operation made: when applied, and when in effect everywhere."""

    weights: dict[str, int]
    reason: str = ""
    change_id: str | None = None
    applied_at: datetime
    propagated_at: datetime | None = Field(
        None, description="When the tier reported it in effect everywhere."
    )
    propagation: Literal["synchronous", "insync", "pending", "unknown"] = Field(
        description="synchronous (HAProxy), insync, pending (not confirmed before the wait's deadline), "
        "unknown (the wait itself failed; the change stands)."
    )
    note: str | None = None
