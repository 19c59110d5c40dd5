"""The audit record of a break-glass failover, and what imports it once Temporal is back.

`drctl failover --break-glass` moves traffic without Temporal (drctl/worker/breakglass.py); this
record is all the evidence it leaves: written to the fleet's audit bucket and printed on stdout.
`drctl failover-import` hands it to the `ImportedOperation` workflow (workflows/imported.py), so
the move appears in `drctl ops list`, in the Temporal UI and in the monitor's decision log.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from drctl.models.activity_io import Capacity, VerifyResult
from drctl.models.failover_plan import FailoverPlan
from drctl.models.health import RegionProbe
from drctl.models.monitor_decisions import Decision

# The monitor's signal: an operation moved the weights without it (workflows/monitor.py).
SIGNAL_IMPORTED = "operation_imported"
# An identity, a host name or a region list: drctl.client.identity allows 200 characters.
MAX_NAME_CHARS = 255


class BreakGlassRecord(BaseModel):
    """Who moved traffic where without Temporal, when, from which host, and on what evidence."""

    kind: Literal["drctl.breakglass.failover/v1"] = "drctl.breakglass.failover/v1"
    id: str = Field(
        description="`<fleet>/<UTC timestamp>`: the object key's tail and the import's workflow id."
    )
    fleet: str
    who: str = Field(description="The operator identity (drctl.client.identity).")
    host: str = Field(description="The host the command ran on (e.g. the surviving region's worker pod).")
    started_at: datetime
    finished_at: datetime
    source: str | None = Field(description="Region(s) drained, comma-separated.")
    target: str
    forced: bool = Field(description="--force: refusals (Temporal reachable, target health) overridden.")
    status: Literal["succeeded", "unverified", "refused", "failed"] = Field(
        description="succeeded: moved and verified through the global endpoint; unverified: moved, "
        "but the target did not answer every verification request within the deadline."
    )
    error: str | None = None
    temporal: str = Field(description="The reachability check's evidence, e.g. the refused address.")
    probe: RegionProbe | None = Field(None, description="The target's inference-aware probe.")
    capacity: Capacity | None = Field(None, description="The target's Deployment, as read.")
    plan: FailoverPlan | None = Field(None, description="The Failover's own plan, from the reads above.")
    weights_before: dict[str, int] = Field(default_factory=dict, description="Global weights as read.")
    weights_after: dict[str, int] = Field(default_factory=dict, description="Global weights read back after.")
    change_id: str | None = Field(None, description="The global tier's change id (Route 53), if any.")
    change_status: str | None = Field(None, description="INSYNC, PENDING, or the tier's own word.")
    scaled_to: int | None = Field(
        None,
        description="Replicas the target was scaled to before the shift (not waited for); None: not scaled.",
    )
    scale_error: str | None = Field(None, description="Why the target's scale-up failed (the shift went on).")
    verify: VerifyResult | None = Field(
        None, description="The last verification through the global endpoint."
    )

    @field_validator("id", "fleet", "who", "host", "target", "source")
    @classmethod
    def _one_printable_line(cls, v: str | None) -> str | None:
        """The names a record carries go to a workflow id, search attributes and the UI: a record
        file is input like any other, so each is one printable line of bounded length."""
        if v is None:
            return v
        if not v or len(v) > MAX_NAME_CHARS:
            raise ValueError(f"must be 1 to {MAX_NAME_CHARS} characters")
        if not v.isprintable():
            raise ValueError("must hold no control, bidi or other unprintable character")
        return v

    @property
    def workflow_id(self) -> str:
        return f"imported/{self.id}"

    def problem_for(self, fleet: str, regions: list[str]) -> str | None:
        """Why this record is not one of `fleet` (with `regions`); None when it is."""
        if self.fleet != fleet:
            return f"the record is of fleet {self.fleet!r}, the config of {fleet!r}"
        named = [self.target, *(self.source or "").split(",")] if self.source else [self.target]
        unknown = [r for r in named if r not in regions]
        if unknown:
            return f"the record names regions fleet {fleet!r} does not have: {unknown}"
        if not self.id.startswith(f"{self.fleet}/"):
            return f"the record's id {self.id!r} is not of fleet {self.fleet!r}"
        return None

    def line(self) -> str:
        """Who moved what, from where and when: one line for the decision log."""
        return (
            f"break-glass failover {self.source or '?'} → {self.target} ({self.status}) by {self.who} "
            f"from {self.host} at {self.finished_at:%Y-%m-%d %H:%M:%S} UTC, without Temporal ({self.temporal})"
        )


class ImportInput(BaseModel):
    record: BreakGlassRecord
    uri: str = Field(description="Where the record was read from: s3://bucket/key or a file path.")
    imported_by: str


class ImportResult(BaseModel):
    status: Literal["imported"] = "imported"
    uri: str
    monitor_told: bool = Field(description="Whether a running monitor recorded it in its decision log.")
    note: str = ""


def adopted(inp: ImportInput, now: datetime) -> Decision:
    """The monitor's decision-log entry for an imported break-glass move: adopted as it is, not undone."""
    rec = inp.record
    return Decision(
        at=now,
        action="failover",
        mode="break-glass",
        outcome="recorded",
        weights_before=dict(rec.weights_before),
        weights_after=dict(rec.weights_after),
        reasons=[
            f"adopted: {rec.line()}; "
            f"weights taken as they are, not undone; audit record {inp.uri}, imported by {inp.imported_by}"
        ],
        error=rec.error,
    )
