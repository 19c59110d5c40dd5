"""Windows over cumulative counter snapshots: increases with counter resets, histogram quantiles.

Pure: the caller adds snapshots as it reads them and passes its own `now`. The arithmetic is
Prometheus's: an increase is summed over consecutive reads, and a read lower than the one before
is a restart of the source (its counters began again at zero), so the new value is all increase.
Quantiles interpolate linearly inside a bucket, as `histogram_quantile` does.
"""

from __future__ import annotations

import operator
from collections import deque
from collections.abc import Iterable, Sequence
from itertools import pairwise

from drctl.models.passive import (
    HistogramSnapshot,
    PassiveThresholds,
    PassiveVerdict,
    SignalSnapshot,
    SourceKind,
    WindowStats,
    judge,
)


def counter_increase(values: Sequence[float]) -> float:
    """Increase over successive reads of one counter, counting a drop as a reset to zero."""
    return sum(b - a if b >= a else b for a, b in zip(values, values[1:], strict=False))


def _histogram_step(old: HistogramSnapshot, new: HistogramSnapshot) -> HistogramSnapshot:
    before = dict(old.buckets)
    reset = new.count < old.count or any(c < before.get(le, 0.0) for le, c in new.buckets)
    if reset:
        return new
    return HistogramSnapshot(
        buckets=[(le, c - before[le]) for le, c in new.buckets if le in before],
        count=new.count - old.count,
        sum=new.sum - old.sum,
    )


def merge_histograms(parts: Iterable[HistogramSnapshot]) -> HistogramSnapshot | None:
    """Add histograms (bucket deltas add up); only the bucket edges every part has are kept."""
    parts = list(parts)
    if not parts:
        return None
    edges = [le for le, _ in parts[0].buckets]
    if all(
        len(p.buckets) == len(edges) and all(a == le for (a, _), le in zip(p.buckets, edges, strict=True))
        for p in parts[1:]
    ):
        # Every replica of a model shares vLLM's edges: add the columns (the per-second path).
        columns = [sum(col) for col in zip(*([c for _, c in p.buckets] for p in parts), strict=True)]
        merged = list(zip(edges, columns, strict=True))
    else:
        common = set.intersection(*({le for le, _ in p.buckets} for p in parts))
        totals = dict.fromkeys(common, 0.0)
        for p in parts:
            for le, c in p.buckets:
                if le in totals:
                    totals[le] += c
        merged = sorted(totals.items())
    # model_construct: the numbers come from validated snapshots, and this runs per replica per second.
    return HistogramSnapshot.model_construct(
        buckets=merged, count=sum(p.count for p in parts), sum=sum(p.sum for p in parts)
    )


def histogram_increase(reads: Sequence[HistogramSnapshot]) -> HistogramSnapshot | None:
    """The observations made between the first and the last read."""
    if len(reads) < 2:
        return None
    edges = [le for le, _ in reads[0].buckets]
    if any([le for le, _ in r.buckets] != edges for r in reads[1:]):
        return merge_histograms(_histogram_step(a, b) for a, b in zip(reads, reads[1:], strict=False))
    # Same edges throughout (the usual case): plain lists and one unvalidated model at the end,
    # because a watcher recomputes this for every replica every second.
    counts = [[c for _, c in r.buckets] for r in reads]
    inc, n, total = [0.0] * len(edges), 0.0, 0.0
    for i in range(1, len(reads)):
        a, b = reads[i - 1], reads[i]
        reset = b.count < a.count or any(map(operator.lt, counts[i], counts[i - 1]))
        step = counts[i] if reset else list(map(operator.sub, counts[i], counts[i - 1]))
        inc = list(map(operator.add, inc, step))
        n += b.count if reset else b.count - a.count
        total += b.sum if reset else b.sum - a.sum
    return HistogramSnapshot.model_construct(buckets=list(zip(edges, inc, strict=True)), count=n, sum=total)


def quantile(q: float, h: HistogramSnapshot) -> float | None:
    """`histogram_quantile(q, ...)` of a bucket increase; None without observations.

    A rank in the +Inf bucket gives the highest finite bound, as Prometheus does: the true value
    is somewhere above it, and the bound is the most that can be said.
    """
    if h.count <= 0 or not 0 <= q <= 1:
        return None
    rank = q * h.count
    lower_le, lower_c = 0.0, 0.0
    for le, c in h.buckets:
        if c >= rank:
            if c == lower_c:
                return le
            return lower_le + (le - lower_le) * (rank - lower_c) / (c - lower_c)
        lower_le, lower_c = le, c
    return h.buckets[-1][0] if h.buckets else None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def stalled(reads: Sequence[SignalSnapshot], after_s: float) -> tuple[float, float] | None:
    """(requests, seconds): how many of one source's requests have waited at least that long for a
    first token, from its reads oldest first; None when the reads cannot tell.

    A lower bound. With W the requests awaiting a first token and X those ever abandoned after one
    (never decreasing), each read's `first_token_balance` is W - X, and W >= 0; so X is at least
    the largest -balance read so far, and balance + that is at most W. The requests awaiting a
    first token at an earlier read, less the first tokens given since, still had none at the last
    read (each first token went to at most one of them), and they are no more than are awaiting
    one then. The earlier read is the latest at least `after_s` before the last.
    """
    last = reads[-1]
    older = [i for i, r in enumerate(reads[:-1]) if last.taken_at - r.taken_at >= after_s]
    if not older or last.ttft is None:
        return None
    i = older[-1]
    first = reads[i]
    balances = [r.first_token_balance() for r in reads]
    if first.ttft is None or any(b is None for b in balances):
        return None  # not a vLLM replica's figures
    if any(b.ttft is None or a.ttft is None or b.ttft.count < a.ttft.count for a, b in pairwise(reads)):
        return None  # it restarted in between: the counters began again
    known = [b for b in balances if b is not None]

    def awaiting(k: int) -> float:
        return max(0.0, known[k] + max(0.0, *(-b for b in known[: k + 1])))

    given = last.ttft.count - first.ttft.count
    return min(awaiting(len(known) - 1), max(0.0, awaiting(i) - given)), last.taken_at - first.taken_at


def view(
    kind: SourceKind, series: Sequence[Sequence[SignalSnapshot]], stall_after_s: float | None = None
) -> WindowStats:
    """One view over several sources of the same kind, each a list of reads, oldest first.

    With `stall_after_s`, also the requests that have waited that long for a first token (`stalled`).
    """
    requests = span = 0.0
    errors: float | None = 0.0
    econ: float | None = None
    stuck: list[tuple[float, float]] = []
    ttft, e2e = [], []
    rtimes, queues = [], []
    for reads in series:
        requests += counter_increase([r.requests_total for r in reads])
        counts = [r.errors_total for r in reads]
        # One source without an error counter makes the view's errors unknown: a sum that left its
        # failures out would read as a lower error rate than the region has.
        if errors is not None:
            errors = (
                None
                if any(c is None for c in counts)
                else errors + counter_increase([c or 0.0 for c in counts])
            )
        span = max(span, reads[-1].taken_at - reads[0].taken_at)
        if all(r.connect_errors_total is not None for r in reads):
            econ = (econ or 0.0) + counter_increase([r.connect_errors_total or 0.0 for r in reads])
        if all(r.ttft for r in reads) and (h := histogram_increase([r.ttft for r in reads if r.ttft])):
            ttft.append(h)
        if all(r.e2e for r in reads) and (h := histogram_increase([r.e2e for r in reads if r.e2e])):
            e2e.append(h)
        if reads[-1].response_time_avg_ms is not None:
            rtimes.append(reads[-1].response_time_avg_ms)
        if reads[-1].queue is not None:
            queues.append(reads[-1].queue)
        if stall_after_s is not None and (got := stalled(reads, stall_after_s)) is not None:
            stuck.append(got)
    t, e = merge_histograms(ttft), merge_histograms(e2e)
    return WindowStats(
        kind=kind,
        span_s=span,
        sources=len(series),
        requests=requests,
        errors=errors,
        ttft_p50_ms=_ms(quantile(0.5, t)) if t else None,
        ttft_p99_ms=_ms(quantile(0.99, t)) if t else None,
        e2e_p99_ms=_ms(quantile(0.99, e)) if e else None,
        response_time_avg_ms=max(rtimes) if rtimes else None,
        queue=sum(queues) if queues else None,
        connect_errors=econ,
        first_tokens=t.count if t else 0.0,
        stalled=sum(n for n, _ in stuck) if stuck else None,
        stalled_for_s=min(w for _, w in stuck) if stuck else None,
    )


class SignalWindow:
    """The recent reads of every source, kept just long enough for one window."""

    def __init__(self, thresholds: PassiveThresholds) -> None:
        self.th = thresholds
        self._reads: dict[tuple[str, str], deque[SignalSnapshot]] = {}

    def add(self, snap: SignalSnapshot) -> None:
        reads = self._reads.setdefault((snap.region, snap.source), deque())
        if reads and snap.taken_at < reads[-1].taken_at:
            raise ValueError(f"{snap.source}: read at {snap.taken_at} is older than the last one")
        reads.append(snap)
        # Keep one read at or before the window's start: it is the baseline of the increase.
        start = snap.taken_at - self.th.window_s
        while len(reads) > 1 and reads[1].taken_at <= start:
            reads.popleft()

    def forget(self, region: str, source: str) -> None:
        """Drop a source that is gone for good (a replica scaled away)."""
        self._reads.pop((region, source), None)

    def verdict(self, region: str, now: float) -> PassiveVerdict:
        fresh: dict[SourceKind, list[list[SignalSnapshot]]] = {}
        missing = []
        for (r, source), reads in sorted(self._reads.items()):
            if r != region:
                continue
            if now - reads[-1].taken_at > self.th.max_age_s:
                missing.append(source)
                continue
            start = reads[-1].taken_at - self.th.window_s
            # The baseline is the last read at or before the window start, else the oldest kept. A read
            # from before a gap in reading (the watcher was not running) is no baseline: the increase
            # since would spread a fault over minutes of old traffic. The window is then shorter.
            first = max((i for i, s in enumerate(reads) if s.taken_at <= start), default=0)
            if reads[first].taken_at < start - self.th.window_s:
                first += 1
            fresh.setdefault(reads[-1].kind, []).append(list(reads)[first:])
        limit_s = self.th.max_ttft_p99_ms / 1000
        views = [view(kind, series, limit_s) for kind, series in sorted(fresh.items())]
        return judge(region, views, missing, self.th)
