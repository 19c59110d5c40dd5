"""The global tier as the monitor last saw it, and what changed since (issue 29, item 3).

The monitor never re-asserts weights it did not set, but it must notice them: a break-glass failover
made without Temporal, a hand edit, a global tier restarted with its config weights, or the data
plane itself taking a region out of rotation (HAProxy's health checks marking the region's server
down; Route 53's health check failing). The tier watch (activities/tier_watch.py) reads the tier
every `interval_s` inside one heartbeating activity and returns only when what it reads differs from
what the monitor last saw, so a quiet fleet costs a handful of history events an hour.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

# A quiet tier returns this often anyway: the monitor's checkpoint (continue-as-new, a changed spec).
RETURN_AFTER_S = 3600.0


class TierSeen(BaseModel):
    """One reading of the global tier."""

    weights: dict[str, int] | None = Field(None, description="Region weights in effect; None: unreadable.")
    out: dict[str, str] = Field(
        default_factory=dict,
        description="Regions the data plane has taken out of rotation (failing its health checks), why.",
    )
    error: str | None = Field(None, description="Why the weights could not be read.")
    at: datetime | None = Field(None, description="When it was read.")


class TierWatchInput(BaseModel):
    fleet: str
    expected: TierSeen | None = Field(
        None, description="What the monitor last saw; None: return the first read."
    )
    interval_s: float = Field(10.0, gt=0, description="Seconds between reads.")
    return_after_s: float = Field(RETURN_AFTER_S, gt=0, description="Return unchanged after this long.")


class TierWatchResult(BaseModel):
    seen: TierSeen
    changed: bool = Field(description="`seen` differs from what the monitor expected.")
    by_drctl: list[str] = Field(
        default_factory=list,
        description="drctl operations of the fleet running, or closed since the read before, that may "
        "have made the change (workflow ids).",
    )
    breakglass: str | None = Field(
        None, description="The audit record of the break-glass failover that set these weights (s3:// URI)."
    )
    breakglass_line: str | None = Field(None, description="Who, from where and when, from that record.")
    imported: str | None = Field(
        None, description="The ImportedOperation the watch started for that record (workflow id)."
    )
    reads: int = Field(0, description="Reads the watch made.")


def differs(before: TierSeen | None, now: TierSeen) -> bool:
    """Whether `now` is news to a monitor that last saw `before`: the weights, the regions out of
    rotation, or whether the tier could be read at all (not the wording of an error)."""
    if before is None:
        return True
    return (
        before.weights != now.weights
        or set(before.out) != set(now.out)
        or (before.error is None) != (now.error is None)
    )


def _fmt(w: dict[str, int]) -> str:
    return "/".join(f"{r} {v}" for r, v in w.items())


def describe(before: TierSeen | None, now: TierSeen) -> list[str]:
    """The change in words, one line per kind of change."""
    lines: list[str] = []
    if before is not None and before.error is None and now.error is not None:
        lines.append(f"the global tier cannot be read: {now.error}")
    if before is not None and before.error is not None and now.error is None:
        lines.append("the global tier can be read again")
    if (
        before is not None
        and before.weights is not None
        and now.weights is not None
        and before.weights != now.weights
    ):
        lines.append(f"weights in effect {_fmt(before.weights)} → {_fmt(now.weights)}")
    before_out = before.out if before is not None else {}
    for r in sorted(set(now.out) - set(before_out)):
        lines.append(f"{r} taken out of rotation by the data plane: {now.out[r]}")
    for r in sorted(set(before_out) - set(now.out)):
        lines.append(f"{r} back in rotation: the data plane's health checks pass")
    return lines
