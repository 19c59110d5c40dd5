"""RTO to the objective: when a target that took traffic meets `objectives.slo` again, held for its window.

Pure (no I/O, no clock): the activity in activities/slo.py reads the target region's replicas'
vLLM `/metrics` about every second and hands the reads here. Each pair of consecutive reads is one
interval; its TTFT p99 comes from the bucket deltas of `vllm:time_to_first_token_seconds` summed over
the replicas (Prometheus `histogram_quantile` arithmetic, drctl.models.passive_window), its error
rate from the request and 5xx counters. The objective is restored at the start of the first run of
intervals, each within the objective, that spans `window_s`: "held for the window".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from drctl.models.config_copy import copy_fields
from drctl.models.passive import SignalSnapshot
from drctl.models.passive_window import counter_increase, histogram_increase, merge_histograms, quantile

if TYPE_CHECKING:
    from drctl.config.capacity import SloConfig


class SloObjective(BaseModel):
    """objectives.slo of the fleet config (defaults and docs live there)."""

    ttft_p99_ms: float = Field(gt=0)
    error_rate: float = Field(ge=0, le=1)
    window_s: float = Field(gt=0)

    @classmethod
    def from_config(cls, cfg: SloConfig) -> SloObjective:
        return copy_fields(cls, cfg)


class SloInterval(BaseModel):
    """The target region between two reads of its replicas; times are seconds after the fault."""

    start_s: float
    end_s: float
    requests: float = Field(description="Requests answered in the interval, all replicas.")
    errors: float | None = Field(
        description="Of which 5xx; None: a replica's metrics have no error counter (unknown, never 0)."
    )
    ttft_p99_ms: float | None = Field(None, description="Server-side TTFT p99; None: no first token.")
    replicas: int = Field(0, description="Replicas read at both ends.")

    @property
    def error_rate(self) -> float | None:
        if self.errors is None:
            return None
        return self.errors / self.requests if self.requests > 0 else None

    def breaches(self, obj: SloObjective) -> list[str]:
        """Each metric over the objective, e.g. 'ttft_p99 412 ms > 200 ms'."""
        out = []
        if self.ttft_p99_ms is not None and self.ttft_p99_ms > obj.ttft_p99_ms:
            out.append(f"ttft_p99 {self.ttft_p99_ms:.0f} ms > {obj.ttft_p99_ms:g} ms")
        rate = self.error_rate
        if rate is not None and rate > obj.error_rate:
            out.append(f"error_rate {rate:.1%} > {obj.error_rate:.1%} ({self.errors:g}/{self.requests:g})")
        return out


def slo_interval(
    before: Mapping[str, SignalSnapshot], after: Mapping[str, SignalSnapshot], start_s: float, end_s: float
) -> SloInterval:
    """One interval from two reads of the same replicas (by name); a replica read once is skipped.

    A counter lower than before is a restarted replica, whose new count is all increase.
    """
    both = sorted(before.keys() & after.keys())
    requests = 0.0
    errors: float | None = 0.0
    ttfts = []
    for name in both:
        a, b = before[name], after[name]
        requests += counter_increase([a.requests_total, b.requests_total])
        if errors is not None:
            pair = (a.errors_total, b.errors_total)
            errors = None if None in pair else errors + counter_increase([c or 0.0 for c in pair])
        if a.ttft and b.ttft and (h := histogram_increase([a.ttft, b.ttft])):
            ttfts.append(h)
    merged = merge_histograms(ttfts)
    p99 = quantile(0.99, merged) if merged else None
    return SloInterval(
        start_s=round(start_s, 3),
        end_s=round(end_s, 3),
        requests=requests,
        errors=errors,
        ttft_p99_ms=None if p99 is None else round(p99 * 1000, 1),
        replicas=len(both),
    )


class SloJudgement(BaseModel):
    restored_s: float | None = Field(None, description="Fault to the start of the held run, s.")
    held_s: float = Field(0.0, description="Traffic time the last run within the objective has held, s.")
    evidence: str = Field(description="One line: the held figures, or what breached last.")
    judged: bool = Field(True, description="False: no traffic to judge by (models.slo.no_traffic).")


def judge_slo(intervals: Sequence[SloInterval], obj: SloObjective) -> SloJudgement:
    """The first run of intervals within the objective whose intervals with traffic add up to window_s.

    An interval in which no request was answered proves nothing either way: it neither breaks a run
    nor counts towards it, so a lull in the load can never pass for the objective holding.
    """
    start: float | None = None
    held = requests = errors = 0.0
    worst: float | None = None
    last_breach: tuple[SloInterval, list[str]] | None = None
    unknown: SloInterval | None = None
    for iv in intervals:
        if breaches := iv.breaches(obj):
            start, held, requests, errors, worst = None, 0.0, 0.0, 0.0, None
            last_breach = (iv, breaches)
            continue
        if iv.requests <= 0:
            continue
        if iv.errors is None:
            # Errors unknown (no error counter on this vLLM's metrics): the objective cannot be
            # shown to hold, so the run breaks, as a breach would, without claiming one.
            start, held, requests, errors, worst = None, 0.0, 0.0, 0.0, None
            unknown = iv
            continue
        if start is None:
            start = iv.start_s
        held += iv.end_s - iv.start_s
        requests += iv.requests
        errors += iv.errors
        if iv.ttft_p99_ms is not None:
            worst = max(worst or 0.0, iv.ttft_p99_ms)
        if held >= obj.window_s - 1e-9:
            p99 = "-" if worst is None else f"{worst:.0f} ms"
            return SloJudgement(
                restored_s=round(start, 3),
                held_s=round(held, 3),
                evidence=(
                    f"ttft_p99 <= {p99} (objective {obj.ttft_p99_ms:g} ms) and error_rate "
                    f"{errors / requests:.1%} (objective {obj.error_rate:.1%}) held {held:.1f}s, "
                    f"{requests:g} requests"
                ),
            )
    if last_breach is not None:
        iv, what = last_breach
        why = f"{'; '.join(what)} at {iv.end_s:.1f}s"
    elif unknown is not None:
        why = (
            f"error rate unknown at {unknown.end_s:.1f}s: the replicas' metrics have no error counter "
            "(http_requests_total; vLLM before 2025 exports none), so the objective cannot be shown to hold"
        )
    elif (lull := no_traffic(intervals, obj.window_s)) is not None:
        return SloJudgement(held_s=round(held, 3), evidence=lull, judged=False)
    else:
        why = f"within the objective for only {held:.1f}s of the {obj.window_s:g}s window"
    return SloJudgement(held_s=round(held, 3), evidence=why)


# An objective is judged under load that keeps coming. drctl's own requests (the monitor's probes:
# a 1-token completion per replica every few seconds, and the failover's verification) answer one
# now and then, which holds no window and is no load: a window in which requests were answered in
# less than this share of its time is "no traffic to judge", not "outside the objective".
MIN_TRAFFIC_SHARE = 0.5


def idle(intervals: Sequence[SloInterval]) -> bool:
    """No request answered in any interval: there is no moved load to judge the objective by."""
    return not any(iv.requests > 0 for iv in intervals)


def no_traffic(intervals: Sequence[SloInterval], window_s: float) -> str | None:
    """Why the last window_s watched has no load to judge by, in one line; None when it has.

    None too before a whole window was watched: the load may be on its way.
    """
    if not intervals or intervals[-1].end_s - intervals[0].start_s < window_s - 1e-9:
        return None
    if idle(intervals):
        return "no request reached the target's replicas"
    last = [iv for iv in intervals if iv.end_s > intervals[-1].end_s - window_s + 1e-9]
    span = sum(iv.end_s - iv.start_s for iv in last)
    busy = sum(iv.end_s - iv.start_s for iv in last if iv.requests > 0)
    if busy >= MIN_TRAFFIC_SHARE * span:
        return None
    requests = sum(iv.requests for iv in last)
    return (
        f"requests answered in only {busy:.1f}s of the last {span:.1f}s ({requests:g}: a trickle such "
        f"as drctl's own probes, not a load), none outside the objective"
    )


class SloWatchInput(BaseModel):
    region: str = Field(description="The target region whose replicas are read.")
    objective: SloObjective
    fault_at: datetime = Field(description="Times are reported from here, as the RTO is.")
    within_s: float = Field(description="The RTO target: restoration must start this soon after the fault.")
    interval_s: float = Field(1.0, gt=0, description="Seconds between reads.")


class SloWatchResult(BaseModel):
    region: str
    restored_s: float | None = Field(None, description="Fault to SLO restored, s; None: not seen.")
    met: bool | None = Field(
        description="Restored within `within_s` of the fault; None: no traffic to judge (none, or too thin "
        "to be a load: models.slo.no_traffic)."
    )
    evidence: str
    started_s: float = Field(0.0, description="Fault to the first read, s.")
    observed_s: float = Field(description="Fault to the last read, s.")
    intervals: list[SloInterval] = Field(
        default_factory=list, description="The last intervals read (at most 60), oldest first."
    )
    read_errors: dict[str, str] = Field(
        default_factory=dict, description="Replica -> why its last read failed."
    )

    def summary(self, within_s: float) -> str:
        """'restored 7.2 s after the fault: ...' or 'not restored within 30 s: ttft_p99 412 ms > 200 ms ...'."""
        if self.met and self.restored_s is not None:
            return f"restored {self.restored_s:.1f}s after the fault: {self.evidence}"
        if self.met is None:
            return (
                f"no traffic to judge in {self.observed_s - self.started_s:.1f}s of watching: {self.evidence}"
            )
        if self.restored_s is not None:
            return f"not restored within {within_s:g}s: restored only {self.restored_s:.1f}s after the fault"
        return f"not restored within {within_s:g}s: {self.evidence}"


def observe_until_s(inp: SloWatchInput) -> float:
    """Seconds after the fault at which the watch stops: a run must start by within_s and hold window_s."""
    return inp.within_s + inp.objective.window_s + inp.interval_s
