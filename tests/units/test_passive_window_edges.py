"""Windows over counter snapshots, at their edges: exact increases, merges, the stalled count, the view.

drctl/models/passive_window.py does Prometheus's arithmetic (increases across resets, bucket
interpolation); these pin each figure exactly, including the ones a verdict only reports.
"""

from __future__ import annotations

import pytest

from drctl.models.passive import (
    HistogramSnapshot,
    PassiveSignal,
    PassiveThresholds,
    SignalSnapshot,
    WindowStats,
)
from drctl.models.passive_window import (
    SignalWindow,
    counter_increase,
    histogram_increase,
    merge_histograms,
    quantile,
    stalled,
    view,
)

TH = PassiveThresholds(window_s=5, max_error_rate=0.2, max_ttft_p99_ms=2000, min_requests=10, max_age_s=3)


def hs(buckets: list[tuple[float, float]], count: float, total: float = 0.0) -> HistogramSnapshot:
    return HistogramSnapshot(buckets=buckets, count=count, sum=total)


def one(count: float) -> HistogramSnapshot:
    """A one-bucket histogram of `count` observations."""
    return hs([(1.0, count)], count)


def snap(t: float, req: float = 0.0, err: float | None = 0.0, **kw: object) -> SignalSnapshot:
    base: dict[str, object] = {
        "source": "r1",
        "kind": "replica",
        "region": "us-west-1",
        "taken_at": t,
        "requests_total": req,
        "errors_total": err,
    }
    return SignalSnapshot.model_validate({**base, **kw})


def flight(t: float, balance: float, first: float, done: float = 0.0) -> SignalSnapshot:
    """A replica read whose first_token_balance is `balance`, with `first` first tokens so far."""
    return snap(t, ttft=one(first), e2e=one(done), in_flight=balance + first - done)


# --- counter_increase --------------------------------------------------------------------------------


def test_a_counter_that_holds_still_has_no_increase() -> None:
    assert counter_increase([5, 5, 7, 7]) == 2
    assert counter_increase([]) == 0
    assert counter_increase([3, 0, 0, 4]) == 4


# --- histogram_increase / merge ----------------------------------------------------------------------


def test_histogram_increase_sums_every_step_of_buckets_count_and_sum() -> None:
    reads = [
        hs([(0.1, 1), (1.0, 2)], 3, 1.5),
        hs([(0.1, 3), (1.0, 5)], 6, 2.0),
        hs([(0.1, 4), (1.0, 9)], 11, 4.5),
    ]
    assert histogram_increase(reads) == hs([(0.1, 3), (1.0, 7)], 8, 3.0)
    # A read that saw nothing new adds nothing.
    assert histogram_increase([reads[1], reads[1]]) == hs([(0.1, 0), (1.0, 0)], 0, 0.0)
    # Two reads are enough; one is not.
    assert histogram_increase(reads[1:]) == hs([(0.1, 1), (1.0, 4)], 5, 2.5)
    assert histogram_increase(reads[:1]) is None


def test_a_reset_in_the_middle_counts_the_new_reads_whole() -> None:
    reads = [
        hs([(0.1, 5), (1.0, 8)], 9, 6.0),
        hs([(0.1, 6), (1.0, 9)], 10, 6.5),
        hs([(0.1, 1), (1.0, 2)], 3, 0.75),  # restarted: fewer observations
        hs([(0.1, 2), (1.0, 4)], 4, 1.0),
    ]
    assert histogram_increase(reads) == hs([(0.1, 1 + 1 + 1), (1.0, 1 + 2 + 2)], 1 + 3 + 1, 0.5 + 0.75 + 0.25)


def test_a_reset_seen_in_the_count_alone_still_resets() -> None:
    reads = [hs([(0.1, 1), (1.0, 2)], 10, 5.0), hs([(0.1, 1), (1.0, 2)], 4, 1.0)]
    assert histogram_increase(reads) == hs([(0.1, 1), (1.0, 2)], 4, 1.0)


def test_histogram_increase_across_other_edges_keeps_sums_and_the_common_edges() -> None:
    old = hs([(0.1, 2), (1.0, 5)], 6, 3.0)
    # A new edge with nothing under it yet is no reset.
    new = hs([(0.1, 3), (0.5, 0), (1.0, 8)], 10, 5.5)
    assert histogram_increase([old, new]) == hs([(0.1, 1), (1.0, 3)], 4, 2.5)
    # The same count again is no reset either.
    same = hs([(0.1, 2), (0.5, 0.5), (1.0, 5)], 6, 3.0)
    assert histogram_increase([old, same]) == hs([(0.1, 0), (1.0, 0)], 0, 0.0)
    # A bucket below its last read is a reset: the new read is all increase.
    lower = hs([(0.1, 1), (0.5, 0.5), (1.0, 9)], 12, 7.0)
    assert histogram_increase([old, lower]) == lower
    # Over three reads with other edges, the steps add up on the edges all of them have.
    third = hs([(0.1, 5), (0.5, 1), (1.0, 12)], 15, 8.0)
    assert histogram_increase([old, new, third]) == hs([(0.1, 3), (1.0, 7)], 9, 5.0)


def test_merge_adds_columns_of_the_same_edges() -> None:
    a = hs([(0.1, 1), (1.0, 3)], 4, 1.0)
    b = hs([(0.1, 2), (1.0, 2)], 5, 2.5)
    c = hs([(0.1, 0), (1.0, 1)], 1, 0.5)
    assert merge_histograms([a, b, c]) == hs([(0.1, 3), (1.0, 6)], 10, 4.0)
    assert merge_histograms([a]) == a
    assert merge_histograms([]) is None
    assert merge_histograms(iter([a, b])) == hs([(0.1, 3), (1.0, 5)], 9, 3.5)


def test_merge_keeps_only_the_edges_every_part_has_in_order() -> None:
    a = hs([(0.1, 1), (0.5, 2), (1.0, 3)], 4, 1.0)
    short = hs([(0.1, 2), (0.5, 4)], 5, 2.0)  # a prefix of a's edges
    assert merge_histograms([a, short]) == hs([(0.1, 3), (0.5, 6)], 9, 3.0)
    other = hs([(0.1, 1), (0.25, 1), (1.0, 2)], 2, 0.5)  # as many edges, not the same
    assert merge_histograms([a, other]) == hs([(0.1, 2), (1.0, 5)], 6, 1.5)
    assert merge_histograms([other, a, short]) == hs([(0.1, 4)], 11, 3.5)
    # No edge in common: the counts still add up, the buckets are gone.
    disjoint = hs([(0.2, 1), (0.6, 2), (2.0, 3)], 3, 0.5)
    assert merge_histograms([a, disjoint]) == hs([], 7, 1.5)


# --- quantile -------------------------------------------------------------------------------------------


def test_quantile_returns_the_bucket_bound_when_the_rank_sits_on_a_flat_step() -> None:
    h = hs([(0.1, 0), (0.5, 4), (1.0, 4)], 4)
    assert quantile(0.0, h) == 0.1
    assert quantile(0.5, h) == pytest.approx(0.1 + 0.4 * 2 / 4)
    # Rank exactly at a bucket's count: that bucket's bound.
    assert quantile(1.0, h) == 0.5
    assert quantile(0.5, hs([(0.2, 2), (0.4, 4)], 4)) == 0.2
    # Observations with no finite bucket: nothing to say.
    assert quantile(0.5, hs([], 3)) is None
    assert quantile(0.5, hs([(0.1, 0)], -1)) is None


def test_quantile_interpolates_from_the_previous_bucket() -> None:
    h = hs([(1.0, 2), (3.0, 6), (7.0, 10)], 10)
    assert quantile(0.8, h) == pytest.approx(3.0 + 4.0 * (8 - 6) / (10 - 6))
    assert quantile(0.4, h) == pytest.approx(1.0 + 2.0 * (4 - 2) / (6 - 2))
    assert quantile(0.1, h) == pytest.approx(0.0 + 1.0 * 1 / 2)
    assert quantile(0.99, hs([(1.0, 2), (3.0, 6), (5.0, 7)], 10)) == 5.0
    # One observation is enough for a quantile.
    assert quantile(0.5, hs([(0.1, 0), (0.5, 1)], 1)) == pytest.approx(0.3)


# --- stalled --------------------------------------------------------------------------------------------


def test_stalled_counts_the_awaiting_less_the_first_tokens_given_since() -> None:
    reads = [flight(0, 5, 10), flight(1, 6, 12), flight(2, 8, 12), flight(3, 10, 13)]
    # The read 2 s before the last is t=1: 6 awaited, 1 first token given since.
    assert stalled(reads, 2.0) == (5.0, 2.0)
    # Exactly after_s before counts; the latest such read is the one.
    # From t=0: 5 awaited, 3 first tokens since; from t=2: 8 awaited, 1 since.
    assert stalled(reads, 3.0) == (2.0, 3.0)
    assert stalled(reads, 1.0) == (7.0, 1.0)
    assert stalled(reads, 3.5) is None


def test_stalled_takes_the_abandoned_out_of_every_balance() -> None:
    # A -3 balance means at least 3 abandoned: every later balance is 3 low.
    reads = [flight(0, -3, 10), flight(1, 2, 12), flight(2, 4, 12), flight(3, 9, 13)]
    assert stalled(reads, 2.0) == (4.0, 2.0)
    # Never more than are awaiting at the last read.
    reads = [flight(0, 8, 10), flight(1, 9, 10), flight(2, 2, 10), flight(3, 3, 10)]
    assert stalled(reads, 2.0) == (3.0, 2.0)
    # More first tokens since than awaited then: none stalled.
    reads = [flight(0, 2, 10), flight(1, 2, 20)]
    assert stalled(reads, 1.0) == (0.0, 1.0)
    reads = [flight(0, -5, 10), flight(1, -6, 10)]
    assert stalled(reads, 1.0) == (0.0, 1.0)
    # An abandonment seen only after the earlier read says nothing of what awaited then.
    reads = [flight(0, 5, 10), flight(1, 6, 10), flight(2, -4, 10), flight(3, 10, 10)]
    assert stalled(reads, 2.0) == (6.0, 2.0)


def test_stalled_cannot_tell_without_vllm_figures_or_across_a_restart() -> None:
    good = [flight(0, 5, 10), flight(2, 6, 12)]
    assert stalled(good, 2.0) == (3.0, 2.0)
    assert stalled([good[0], snap(2, in_flight=6.0, e2e=one(0))], 2.0) is None  # last has no ttft
    assert stalled([snap(0, in_flight=5.0, e2e=one(0)), good[1]], 2.0) is None  # first has no ttft
    assert stalled([flight(0, 5, 10), snap(1, ttft=one(11)), good[1]], 2.0) is None  # a balance unknown
    assert stalled([flight(0, 5, 10), flight(1, 5, 3), good[1]], 2.0) is None  # restarted between
    assert stalled([good[0], flight(1, 5, 10), good[1]], 2.0) == (3.0, 2.0)


# --- view ---------------------------------------------------------------------------------------------


def test_a_view_adds_its_sources_and_keeps_every_figure() -> None:
    a = [
        snap(0, 100, 10, connect_errors_total=1.0, ttft=hs([(0.5, 0), (1.0, 0)], 0), queue=1.0),
        # The gauges of a read before the last are not the view's.
        snap(
            2,
            120,
            12,
            connect_errors_total=2.0,
            ttft=hs([(0.5, 20), (1.0, 25)], 25),
            queue=9.0,
            response_time_avg_ms=99.0,
        ),
        snap(
            4,
            150,
            15,
            connect_errors_total=3.0,
            ttft=hs([(0.5, 40), (1.0, 50)], 50),
            queue=2.0,
            e2e=hs([(0.5, 0), (1.0, 1)], 1),
            response_time_avg_ms=30.0,
        ),
    ]
    b = [
        snap(
            1,
            0,
            0,
            connect_errors_total=0.0,
            ttft=hs([(0.5, 0), (1.0, 0)], 0),
            e2e=hs([(0.5, 0), (1.0, 0)], 0),
        ),
        snap(
            3,
            50,
            5,
            connect_errors_total=4.0,
            ttft=hs([(0.5, 50), (1.0, 50)], 50),
            e2e=hs([(0.5, 5), (1.0, 10)], 10),
            queue=3.0,
            response_time_avg_ms=70.0,
        ),
    ]
    got = view("gateway", [a, b])
    # 90 of 100 first tokens under 0.5 s: the p50 is in the first bucket, the p99 in the second.
    assert got.ttft_p50_ms == pytest.approx(0.5 * 50 / 90 * 1000)
    assert got.ttft_p99_ms == pytest.approx((0.5 + 0.5 * 9 / 10) * 1000)
    # a's first read has no e2e histogram: the e2e p99 is b's alone, rank 9.9 of 5 + 5.
    assert got.e2e_p99_ms == pytest.approx((0.5 + 0.5 * 4.9 / 5) * 1000)
    assert got.model_copy(
        update={"ttft_p50_ms": None, "ttft_p99_ms": None, "e2e_p99_ms": None}
    ) == WindowStats(
        kind="gateway",
        span_s=4.0,
        sources=2,
        requests=100.0,
        errors=10.0,
        response_time_avg_ms=70.0,
        queue=5.0,
        connect_errors=6.0,
        first_tokens=100.0,
        stalled=None,
        stalled_for_s=None,
    )


def test_a_view_without_histograms_gauges_or_connect_counters_reports_none() -> None:
    got = view("replica", [[snap(0, 10), snap(2, 30)], [snap(0, 5), snap(1, 5, connect_errors_total=1.0)]])
    assert got == WindowStats(
        kind="replica",
        span_s=2.0,
        sources=2,
        requests=20.0,
        errors=0.0,
        connect_errors=None,
        first_tokens=0.0,
    )
    assert view("replica", []) == WindowStats(kind="replica", span_s=0.0, sources=0, requests=0.0, errors=0.0)


def test_one_source_without_an_error_counter_makes_the_errors_unknown() -> None:
    counted = [snap(0, 0, 0), snap(2, 10, 4)]
    uncounted = [snap(0, 0, None), snap(2, 10, None)]
    assert view("replica", [counted, uncounted]).errors is None
    assert view("replica", [uncounted, counted]).errors is None
    assert view("replica", [counted, [snap(0, 0, 0), snap(1, 4, None)]]).errors is None
    assert view("replica", [counted, counted]).errors == 8.0


def test_a_view_sums_the_stalled_and_keeps_the_shortest_wait() -> None:
    a = [flight(0, 6, 10), flight(3, 7, 10)]
    b = [flight(0, 3, 10), flight(1, 4, 10), flight(2.5, 4, 10)]
    got = view("replica", [a, b], stall_after_s=1.5)
    assert (got.stalled, got.stalled_for_s) == (6.0 + 4.0, 1.5)
    assert got.first_tokens == 0.0
    # Without stall_after_s, no stall figure at all.
    assert view("replica", [a, b]).stalled is None
    # A source that cannot tell adds nothing.
    got = view("replica", [a, [flight(0, 3, 10), flight(1, 4, 2)]], stall_after_s=1.5)
    assert (got.stalled, got.stalled_for_s) == (6.0, 3.0)


def test_a_view_e2e_p99_is_in_milliseconds() -> None:
    reads = [snap(0, e2e=hs([(1.0, 0), (2.0, 0)], 0)), snap(1, e2e=hs([(1.0, 0), (2.0, 100)], 100))]
    assert view("replica", [reads]).e2e_p99_ms == pytest.approx(1990.0)


# --- SignalWindow ---------------------------------------------------------------------------------------


def test_a_read_at_the_same_time_is_accepted_and_an_older_one_named() -> None:
    w = SignalWindow(TH)
    w.add(snap(2.5, 0, source="replica-a"))
    w.add(snap(2.5, 1, source="replica-a"))
    with pytest.raises(ValueError) as err:
        w.add(snap(1.5, 0, source="replica-a"))
    assert str(err.value) == "replica-a: read at 1.5 is older than the last one"
    # Another source, or another region's source of the same name, keeps its own order.
    w.add(snap(1.0, 0, source="replica-b"))
    w.add(snap(0.5, 0, source="replica-a", region="us-east-1"))


def test_the_window_keeps_one_read_at_or_before_its_start() -> None:
    w = SignalWindow(TH)
    for t, req in ((0, 0), (1, 10), (2, 20), (7, 70)):
        w.add(snap(t, req))
    # Start 2: the read at t=2 is the baseline, the older ones are gone.
    (rv,) = w.verdict("us-west-1", now=7).views
    assert (rv.requests, rv.span_s) == (50.0, 5.0)
    w = SignalWindow(TH)
    for t, req in ((0, 0), (1, 10), (6.5, 65)):
        w.add(snap(t, req))
    # Start 1.5: t=1 is the baseline; t=0 went.
    (rv,) = w.verdict("us-west-1", now=7).views
    assert (rv.requests, rv.span_s) == (55.0, 5.5)


def test_the_baseline_is_the_latest_read_at_the_start_and_a_gap_ends_it() -> None:
    w = SignalWindow(TH)
    w.add(snap(0, 0))
    w.add(snap(10, 100))
    # Start 5; the read at 0 is exactly one window before it: still a baseline.
    (rv,) = w.verdict("us-west-1", now=10).views
    assert (rv.requests, rv.span_s) == (100.0, 10.0)
    w = SignalWindow(TH)
    w.add(snap(0, 0))
    w.add(snap(10.5, 100))
    w.add(snap(11, 110))
    w.add(snap(12, 130))
    # Start 7; the read at 0 is more than a window before it: the window starts at 10.5.
    (rv,) = w.verdict("us-west-1", now=12).views
    assert (rv.requests, rv.span_s) == (30.0, 1.5)


def test_a_verdict_reads_only_its_region_and_groups_views_by_kind() -> None:
    w = SignalWindow(TH)
    w.add(snap(0, 0, source="gw", kind="gateway"))
    w.add(snap(2, 40, source="gw", kind="gateway"))
    w.add(snap(0, 0, source="rb"))
    w.add(snap(2, 12, source="rb"))
    w.add(snap(0, 0, source="ra"))
    w.add(snap(2, 8, source="ra"))
    w.add(snap(0, 0, source="rx", region="us-east-1"))
    w.add(snap(2, 900, 900, source="rx", region="us-east-1"))
    v = w.verdict("us-west-1", now=2)
    assert v.signal is PassiveSignal.OK and v.missing == []
    assert [(x.kind, x.sources, x.requests) for x in v.views] == [("gateway", 1, 40.0), ("replica", 2, 20.0)]
    assert v.reason == "within thresholds: gateway 40 req in 2.0s, replica 20 req in 2.0s"


def test_a_verdict_names_stale_sources_in_order_and_forget_drops_one() -> None:
    w = SignalWindow(TH)
    for s in ("r2", "r1", "r3"):
        w.add(snap(0, 0, source=s))
    w.add(snap(4, 40, source="r3"))
    v = w.verdict("us-west-1", now=4)
    assert v.missing == ["r1", "r2"] and v.views[0].sources == 1
    w.forget("us-west-1", "r1")
    w.forget("us-west-1", "never-seen")
    w.forget("us-east-1", "r2")
    assert w.verdict("us-west-1", now=4).missing == ["r2"]


def test_a_verdict_finds_stalls_at_the_ttft_limit() -> None:
    # The limit is 2 s: a read 2 s before the last shows the stall, one 1.999 s before does not.
    th = TH.model_copy(update={"min_requests": 1})
    w = SignalWindow(th)
    for t, balance in ((0, 6), (1, 8), (2, 10)):
        w.add(flight(t, balance, 10).model_copy(update={"requests_total": 10.0 * t}))
    (rv,) = w.verdict("us-west-1", now=2).views
    assert (rv.stalled, rv.stalled_for_s) == (6.0, 2.0)
    w = SignalWindow(th)
    for t, balance in ((0.001, 6), (1, 8), (2, 10)):
        w.add(flight(t, balance, 10).model_copy(update={"requests_total": 10.0 * t}))
    (rv,) = w.verdict("us-west-1", now=2).views
    assert rv.stalled is None


def test_a_source_keeps_only_the_reads_from_the_last_one_at_or_before_the_window_start() -> None:
    w = SignalWindow(TH)
    for t in (0, 1, 2, 3, 7):
        w.add(snap(t, 10 * t))
    # Start 2: the read at 2 is the baseline; 0 and 1 are dropped.
    assert [r.taken_at for r in w._reads[("us-west-1", "r1")]] == [2, 3, 7]
    w.add(snap(20, 200))
    # Start 15: the read at 7 is the last one at or before it, so it stays as the baseline.
    assert [r.taken_at for r in w._reads[("us-west-1", "r1")]] == [7, 20]
