"""Models of step analysis (candidate vs baseline in one window) and the verdict rule `judge`.

Shared by upgrades (canary or green vs stable) and migrations (target region vs source).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from drctl.config.schema import FleetConfig
from drctl.models.config_copy import copy_fields


class Verdict(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"


class TrackSample(BaseModel):
    """What one track did during one analysis window."""

    track: str = Field(description="region/track, as the analysis names it.")
    requests: int = 0
    errors: int = 0
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


# The failed_metric values judge() gives for latency (an error rate is "error_rate").
LATENCY_METRICS = ("ttft_p99", "ttft_p50")


class AnalysisLimits(BaseModel):
    max_error_rate: float
    max_ttft_p50_ratio: float
    max_ttft_p99_ratio: float
    min_samples: int
    # 0 for requests recorded before the floor existed: they judged the ratio alone.
    min_ttft_increase_ms: float = 0.0


class TrackRef(BaseModel):
    region: str
    track: str

    def __str__(self) -> str:
        return f"{self.region}/{self.track}"


class AnalysisRequest(BaseModel):
    candidate: TrackRef = Field(
        description="What is under test: a canary or green track, or a migration target."
    )
    baseline: TrackRef = Field(description="What it is compared with, measured in the same window.")
    window_s: float = Field(description="Analysis window, seconds.")
    limits: AnalysisLimits


class AnalysisResult(BaseModel):
    verdict: Verdict
    reason: str
    failed_metric: str | None = Field(None, description="error_rate, ttft_p50 or ttft_p99 when FAIL.")
    candidate: TrackSample
    baseline: TrackSample


def judge(cand: TrackSample, base: TrackSample, limits: AnalysisLimits) -> AnalysisResult:
    """Compare a candidate track with its baseline measured in the same window.

    Errors are judged first: a candidate that fails requests fails even with few samples once the
    failures alone exceed the limit at min_samples, because waiting for more data only serves
    more users errors. A TTFT ratio over its limit fails when the candidate is also at least
    `min_ttft_increase_ms` slower; the workflow confirms a latency FAIL with a second window
    before it rolls back (workflows/progressive.py).
    """

    def result(verdict: Verdict, reason: str, metric: str | None = None) -> AnalysisResult:
        return AnalysisResult(
            verdict=verdict, reason=reason, failed_metric=metric, candidate=cand, baseline=base
        )

    if cand.errors > limits.max_error_rate * max(cand.requests, limits.min_samples):
        return result(
            Verdict.FAIL,
            f"{cand.track} error rate {cand.error_rate:.1%} ({cand.errors}/{cand.requests}) "
            f"> limit {limits.max_error_rate:.1%}",
            "error_rate",
        )
    if cand.requests < limits.min_samples or base.requests < limits.min_samples:
        return result(
            Verdict.INCONCLUSIVE,
            f"too few samples: {cand.track} {cand.requests}, {base.track} {base.requests} "
            f"(need {limits.min_samples} each)",
        )
    for metric, limit in (("ttft_p99", limits.max_ttft_p99_ratio), ("ttft_p50", limits.max_ttft_p50_ratio)):
        c = getattr(cand, f"{metric}_ms")
        b = getattr(base, f"{metric}_ms")
        if c is None or b is None:
            return result(Verdict.INCONCLUSIVE, f"no {metric} measured")
        # A floor of 1 ms keeps a near-zero baseline from turning jitter into a huge ratio, and a
        # ratio fails only with a real difference behind it (few samples, fast replicas: p99 is a max).
        ratio = c / max(b, 1.0)
        if ratio > limit and c - b >= limits.min_ttft_increase_ms:
            return result(
                Verdict.FAIL,
                f"{cand.track} {metric} {c:.0f} ms is {ratio:.1f}x {base.track} ({b:.0f} ms) > limit {limit:g}x"
                + (f" and {c - b:.0f} ms slower" if limits.min_ttft_increase_ms else ""),
                metric,
            )
    return result(
        Verdict.PASS,
        f"{cand.track} error {cand.error_rate:.1%}, ttft p50 {cand.ttft_p50_ms:.0f} ms / p99 "
        f"{cand.ttft_p99_ms:.0f} ms vs {base.track} p50 {base.ttft_p50_ms:.0f} / p99 {base.ttft_p99_ms:.0f} ms",
    )


def limits_from(cfg: FleetConfig) -> AnalysisLimits:
    return copy_fields(AnalysisLimits, cfg.upgrade)
