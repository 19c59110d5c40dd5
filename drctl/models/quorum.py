"""The quorum of vantage points: counting who sees a region down before the monitor fails it over.

One worker with a bad network path would otherwise fail over a healthy region. The monitor's own
probe (vantage "main") and the worker of every other region (vantage = that region) each give a
view of region X; a region's own worker never votes on itself. X is confirmed down only when more
than half of ALL voters see it down: a voter that did not answer, or answered with an old probe,
counts toward the total but not as down (missing, never healthy). Pure: the monitor calls this.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from drctl.models.activity_io import ProbeBatch
from drctl.models.failover_plan import probe_passes
from drctl.models.health import ProbeStatus, RegionProbe

MAIN = "main"  # the monitor's own probe, from the main task queue's worker
NO_QUORUM = "NO_QUORUM"
REVOTE_CAP_S = 60.0  # the longest wait between votes while a region stays UNHEALTHY without a quorum

Verdict = Literal["confirmed", "no_quorum"]


class QuorumVote(BaseModel):
    """One vote on a region: what each vantage point saw, and when the next vote may run."""

    at: datetime
    verdict: Verdict
    views: dict[str, str] = Field(description="Vantage → 'down: why', 'healthy', or 'missing: why'.")
    down: int
    voters: int
    backoff_s: float = Field(description="Wait from `at` to the next vote while the region stays UNHEALTHY.")

    @property
    def retry_at(self) -> datetime:
        return self.at + timedelta(seconds=self.backoff_s)

    def summary(self) -> str:
        return f"{self.down}/{self.voters} see it down ({self.verdict})"


def voters(regions: list[str], region: str) -> list[str]:
    """Vantage points that vote on `region`: main and every other region."""
    return [MAIN, *(r for r in regions if r != region)]


def view_of(
    batch: ProbeBatch, region: str, received: datetime, max_age_s: float, fail_on_degraded: bool
) -> str:
    """One peer's view of `region` from its probe batch, received by the monitor at `received`."""
    if region in batch.unresolved:
        return f"missing: {batch.unresolved[region]}"
    probe = next((p for p in batch.probes if p.region == region), None)
    if probe is None:
        return "missing: no probe of the region in the answer"
    age = _age_s(probe, received)
    if age is None:
        return "missing: the probe has no time"
    if abs(age) > max_age_s:
        # Old (or from a clock far off): what it says is not now, so it is neither down nor healthy.
        return f"missing: probe {age:.1f}s old (max {max_age_s:g}s)"
    if probe.status is ProbeStatus.AUTH:
        return f"missing: refused drctl's token ({probe.reason})"
    if probe_passes(probe, fail_on_degraded):
        return "healthy"
    return f"down: {probe.reason or probe.status.value}"


def _age_s(probe: RegionProbe, received: datetime) -> float | None:
    try:
        at = datetime.fromisoformat(probe.probed_at)
    except ValueError:
        return None
    if at.tzinfo is None or received.tzinfo is None:
        return None
    return (received - at).total_seconds()


def decide(views: dict[str, str], at: datetime, previous: QuorumVote | None, interval_s: float) -> QuorumVote:
    """Count `views` (one per voter): confirmed on a strict majority of all voters seeing it down.

    Without a quorum the next vote waits interval_s, then twice as long after each further vote
    without one (capped at REVOTE_CAP_S): a lasting partition costs a few activities a minute.
    """
    down = sum(1 for v in views.values() if v.startswith("down"))
    verdict: Verdict = "confirmed" if down * 2 > len(views) else "no_quorum"
    if previous is None or previous.verdict == "confirmed":
        backoff = interval_s
    else:
        backoff = previous.backoff_s * 2
    return QuorumVote(
        at=at,
        verdict=verdict,
        views=views,
        down=down,
        voters=len(views),
        backoff_s=min(max(backoff, interval_s), max(REVOTE_CAP_S, interval_s)),
    )
