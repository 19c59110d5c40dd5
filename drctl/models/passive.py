"""Passive health signals: what the gateways and inference servers already count, judged per region.

Pure (no I/O, no clock): readers in drctl/providers turn HAProxy `show stat`, vLLM `/metrics` or a
Prometheus query into the types here, with times from the caller's clock. `judge` turns a
region's windowed views into a verdict. A breach only makes a region SUSPECT: the active probe
confirms before anything fails over. Too little traffic gives NO_SIGNAL (probes alone decide),
and data older than `max_age_s` counts as MISSING, never as healthy.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from drctl.models.config_copy import copy_fields

if TYPE_CHECKING:
    from drctl.config.passive import PassiveConfig

SourceKind = Literal["gateway", "replica", "prometheus"]


class HistogramSnapshot(BaseModel):
    """A Prometheus histogram as read: cumulative counts per finite upper bound, plus the total.

    The +Inf bucket is `count` (it always equals it), which keeps infinities out of JSON.
    """

    buckets: list[tuple[float, float]] = Field(
        description="(le, cumulative count), le ascending, finite only."
    )
    count: float = Field(description="Observations in total: the +Inf bucket.")
    sum: float = Field(0.0, description="Sum of the observed values (seconds for vLLM's latency histograms).")


class SignalSnapshot(BaseModel):
    """One read of one source's cumulative counters (they only grow, except across a restart)."""

    source: str = Field(description="What was read, e.g. 'gateway:region' or a replica name.")
    kind: Literal["gateway", "replica"]
    region: str
    taken_at: float = Field(description="When it was read, seconds on the reader's monotonic clock.")
    requests_total: float = Field(description="Requests answered, cumulative.")
    errors_total: float | None = Field(
        description="Requests answered with a 5xx (or never answered), cumulative; None: the source has no "
        "error counter (vLLM releases before http_requests_total), so its errors are unknown, never 0."
    )
    ttft: HistogramSnapshot | None = Field(None, description="vllm:time_to_first_token_seconds.")
    e2e: HistogramSnapshot | None = Field(None, description="vllm:e2e_request_latency_seconds.")
    response_time_avg_ms: float | None = Field(
        None,
        description="Gauge: HAProxy rtime, the mean time to response headers over its last 1024 requests.",
    )
    queue: float | None = Field(None, description="Gauge: HAProxy qcur, or vllm:num_requests_waiting.")
    in_flight: float | None = Field(
        None, description="Gauge: vllm:num_requests_running + num_requests_waiting (replicas only)."
    )
    connect_errors_total: float | None = Field(None, description="HAProxy econ, cumulative (informational).")

    def first_token_balance(self) -> float | None:
        """In flight minus (first tokens - finished): the requests awaiting a first token, less every
        request ever abandoned after its first token (vLLM counts first tokens and finished requests,
        not who is waiting, and an abandoned request may never count as finished). None without the
        figures; see `passive_window.stalled` for how the abandoned are taken out.
        """
        if self.in_flight is None or self.ttft is None or self.e2e is None:
            return None
        return self.in_flight - (self.ttft.count - self.e2e.count)


class WindowStats(BaseModel):
    """One view of a region over the last window: the gateways, the replicas, or a Prometheus query."""

    kind: SourceKind
    span_s: float = Field(description="Seconds the window actually covers.")
    sources: int = Field(description="Sources that contributed.")
    requests: float
    errors: float | None = Field(
        description="Of which failed; None: a source had no error counter (unknown)."
    )
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    response_time_avg_ms: float | None = None
    queue: float | None = None
    connect_errors: float | None = Field(
        None, description="Gateway: failed connections to its servers (econ)."
    )
    stalled: float | None = Field(
        None,
        description="Replicas: requests that had no first token at one read and still none `stalled_for_s` "
        "later. A lower bound on requests whose TTFT exceeds that, seen before any of them gets a "
        "first token: a stalled region answers nothing, so its histograms and counters stay quiet.",
    )
    stalled_for_s: float | None = Field(
        None, description="How long the `stalled` requests have waited at least."
    )

    first_tokens: float = Field(0.0, description="First tokens in the window (the TTFT histogram's count).")

    @property
    def error_rate(self) -> float | None:
        if self.errors is None:
            return None
        return self.errors / self.requests if self.requests > 0 else None


class PassiveSignal(str, Enum):
    OK = "OK"  # enough traffic, no threshold breached
    SUSPECT = "SUSPECT"  # a threshold breached: the active probe confirms
    NO_SIGNAL = "NO_SIGNAL"  # too little traffic in the window: probes alone decide
    MISSING = "MISSING"  # nothing fresh was read: not healthy, unknown


class PassiveThresholds(BaseModel):
    """The limits of health.passive in the fleet config (defaults and docs live there)."""

    window_s: float = Field(gt=0)
    max_error_rate: float = Field(gt=0, le=1)
    max_ttft_p99_ms: float = Field(gt=0)
    min_requests: int = Field(ge=1)
    max_age_s: float = Field(gt=0)

    @classmethod
    def from_config(cls, cfg: PassiveConfig) -> PassiveThresholds:
        return copy_fields(cls, cfg)


class PassiveVerdict(BaseModel):
    region: str
    signal: PassiveSignal
    reason: str = Field(description="Why, in one line: the breach, the traffic, or what is missing.")
    views: list[WindowStats] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list, description="Sources with no read newer than max_age_s.")
    ttft_floor_ms: float | None = Field(
        None,
        description="SUSPECT on TTFT: the TTFT p99 the views show at least, from the histograms or the "
        "stalled requests' wait (a partial shed may act on it alone).",
    )


RTIME_REQUESTS = 1024  # HAProxy's `rtime` is the mean over the last 1024 requests


def _breaches(view: WindowStats, th: PassiveThresholds) -> list[str]:
    out = []
    rate = view.error_rate
    if rate is not None and rate > th.max_error_rate:
        # Failed connects tell a region that is down from one that answers with errors.
        econ = f", {view.connect_errors:g} failed connects" if view.connect_errors else ""
        out.append(
            f"{view.kind} error rate {rate:.0%} > {th.max_error_rate:.0%} "
            f"({view.errors:g}/{view.requests:g}{econ})"
        )
    if view.ttft_p99_ms is not None and view.ttft_p99_ms > th.max_ttft_p99_ms:
        out.append(f"{view.kind} TTFT p99 {view.ttft_p99_ms:.0f} ms > {th.max_ttft_p99_ms:.0f} ms")
    elif stalled_beyond(view, th.max_ttft_p99_ms):
        out.append(
            f"{view.kind} TTFT p99 >= {(view.stalled_for_s or 0) * 1000:.0f} ms > {th.max_ttft_p99_ms:.0f} ms: "
            f"{view.stalled:g} requests without a first token for {view.stalled_for_s:.1f} s"
        )
    # A mean never exceeds the p99 of the same requests, so a mean above the limit is a breach.
    # The reverse does not hold (a server may send headers before its first token), so the
    # gateway's mean can make a region SUSPECT but never vouches for it. HAProxy's rtime averages
    # its last RTIME_REQUESTS requests, not the window: it speaks for the window only when the
    # window holds that many (otherwise a slow spell minutes ago would still read as a breach).
    avg = view.response_time_avg_ms
    if avg is not None and view.requests >= RTIME_REQUESTS and avg > th.max_ttft_p99_ms:
        out.append(f"{view.kind} mean response time {avg:.0f} ms > {th.max_ttft_p99_ms:.0f} ms")
    return out


STALLED_MIN = 2  # one request stuck behind a huge prompt is not a stalled region


def stalled_beyond(view: WindowStats, limit_ms: float) -> bool:
    """Whether the stalled requests alone put the TTFT p99 above `limit_ms`: at least STALLED_MIN of
    them, over 1 % of the window's first tokens and stalled requests, each waiting longer than that."""
    if not view.stalled or view.stalled_for_s is None or view.stalled < STALLED_MIN:
        return False
    if view.stalled_for_s * 1000 < limit_ms:
        return False
    return view.stalled > 0.01 * (view.first_tokens + view.stalled)


def ttft_floor_ms(view: WindowStats, th: PassiveThresholds) -> float | None:
    """The TTFT p99 a view shows at least when it breaches on TTFT (`_breaches`); None otherwise."""
    if view.ttft_p99_ms is not None and view.ttft_p99_ms > th.max_ttft_p99_ms:
        return view.ttft_p99_ms
    if stalled_beyond(view, th.max_ttft_p99_ms) and view.stalled_for_s is not None:
        return view.stalled_for_s * 1000
    return None


def _summary(v: WindowStats) -> str:
    out = f"{v.kind} {v.requests:g} req in {v.span_s:.1f}s"
    if v.error_rate:
        out += f", {v.error_rate:.0%} 5xx"
    if v.ttft_p99_ms is not None:
        out += f", TTFT p99 {v.ttft_p99_ms:.0f} ms"
    if v.e2e_p99_ms is not None:
        out += f", e2e p99 {v.e2e_p99_ms:.0f} ms"
    return out


def judge(region: str, views: list[WindowStats], missing: list[str], th: PassiveThresholds) -> PassiveVerdict:
    """The region's verdict from its fresh views; `missing` names sources whose data is too old."""
    gone = f"; no fresh read from {', '.join(missing)}" if missing else ""

    def verdict(signal: PassiveSignal, reason: str) -> PassiveVerdict:
        return PassiveVerdict(region=region, signal=signal, views=views, missing=missing, reason=reason)

    if not views:
        listed = f" ({', '.join(missing)})" if missing else ""
        return verdict(PassiveSignal.MISSING, f"no passive signal newer than {th.max_age_s:g}s{listed}")
    # Stalled requests are traffic too: a region that answers nothing has no completed requests.
    busy = [v for v in views if v.requests + (v.stalled or 0) >= th.min_requests]
    breaches = [b for v in busy for b in _breaches(v, th)]
    if breaches:
        out = verdict(PassiveSignal.SUSPECT, "; ".join(breaches) + gone)
        out.ttft_floor_ms = max((f for v in busy if (f := ttft_floor_ms(v, th)) is not None), default=None)
        return out
    traffic = ", ".join(_summary(v) for v in views)
    if not busy:
        return verdict(
            PassiveSignal.NO_SIGNAL, f"too little traffic (< {th.min_requests} requests): {traffic}{gone}"
        )
    return verdict(PassiveSignal.OK, f"within thresholds: {traffic}{gone}")
