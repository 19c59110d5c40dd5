"""A region's capacity signals over a window: two readings of its replicas' cumulative counters.

Pure. The `read_capacity_signals` activity reads every ready replica's /metrics once per call and
returns, beside the `RegionSignals`, the `CapacitySample` it read; the caller (the monitor) keeps
that sample in its state and hands it back with the next call. Rates and TTFT quantiles are the
increase between the two readings, with Prometheus's arithmetic (drctl/models/passive_window.py):
a counter lower than before is a restarted replica whose counters began again at zero.

Why not Prometheus's `histogram_quantile`: it needs a Prometheus that scrapes every replica, and its
scrape interval and rate window add their length to every reading. Two direct reads need nothing
but the replicas, and the window is exactly the time between two ticks.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from drctl.models.capacity import RegionSignals
from drctl.models.passive import SignalSnapshot
from drctl.models.passive_window import view


class CapacitySample(BaseModel):
    """One reading of a region's replicas' cumulative counters, the baseline of the next window."""

    region: str
    taken_at: float = Field(description="Wall-clock seconds (epoch) of the reading: it crosses workers.")
    replicas: list[SignalSnapshot] = Field(default_factory=list)


class ReplicaGauges(BaseModel):
    """What one replica's gauges say now."""

    name: str
    running: float
    waiting: float
    max_num_seqs: int | None = None


class CapacityReadInput(BaseModel):
    region: str
    previous: CapacitySample | None = Field(None, description="The last call's sample, the window's start.")
    max_window_s: float = Field(
        60.0, gt=0, description="A previous sample older than this is no baseline: the rates would be stale."
    )


class CapacityReadResult(BaseModel):
    signals: RegionSignals
    sample: CapacitySample


def _rate(requests: float | None, span: float, read: int, ready: int, problems: list[str]) -> float | None:
    """Requests per second over the ready replicas, from the `read` of them seen at both ends."""
    if requests is None or span <= 0 or read == 0:
        return None
    if read < ready:
        problems.append(f"request rate from {read} of {ready} ready replicas, scaled up")
        return requests / span * ready / read
    return requests / span


def region_signals(
    region: str,
    reads: list[tuple[SignalSnapshot, ReplicaGauges]],
    previous: CapacitySample | None,
    *,
    ready: int,
    desired: int,
    taken_at: float,
    measured_at: datetime,
    max_window_s: float,
    problems: list[str],
) -> CapacityReadResult:
    """The region's signals from this reading of its ready replicas and the previous one.

    Gauges (running, waiting, max_num_seqs) are this reading's. The window covers the replicas read
    both times; one new since the previous reading (or read only now) adds its gauges but not its
    rates. Without a usable previous sample the rates and quantiles are None and window_s is 0.
    """
    problems = list(problems)
    before = {s.source: s for s in (previous.replicas if previous else [])}
    span = taken_at - previous.taken_at if previous else 0.0
    if previous and not 0 < span <= max_window_s:
        problems.append(f"previous sample is {span:.1f}s old, outside (0, {max_window_s:g}]s: no window yet")
        before, span = {}, 0.0
    pairs = [[before[s.source], s] for s, _ in reads if s.source in before]
    win = view("replica", pairs) if pairs else None
    requests = win.requests if win else None
    seqs = [g.max_num_seqs for _, g in reads if g.max_num_seqs is not None]
    signals = RegionSignals(
        region=region,
        ready_replicas=ready,
        desired_replicas=desired,
        running=sum(g.running for _, g in reads),
        waiting=sum(g.waiting for _, g in reads),
        max_num_seqs=min(seqs) if seqs else None,
        running_while_waiting=max(
            (g.running for _, g in reads if g.waiting > 0 and g.running > 0), default=None
        ),
        ttft_p99_ms=win.ttft_p99_ms if win else None,
        error_rate=win.error_rate if win else None,
        load_rps=_rate(requests, span, len(pairs), ready, problems),
        requests=requests,
        window_s=span if win else 0.0,
        measured_at=measured_at,
        replicas_read=len(reads),
        problems=problems,
    )
    return CapacityReadResult(
        signals=signals,
        sample=CapacitySample(region=region, taken_at=taken_at, replicas=[s for s, _ in reads]),
    )
