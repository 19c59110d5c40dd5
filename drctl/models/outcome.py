"""What a finished operation reports for the metrics: the input of the `record_outcome` activity."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class OutcomeInput(BaseModel):
    operation: Literal["failover", "failback"]
    fleet: str
    result: str = Field(description="The operation's final status, e.g. succeeded, failed, refused.")
    rto_s: float | None = Field(None, description="Measured RTO of a failover, seconds.")
    rto_target_s: float
