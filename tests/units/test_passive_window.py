"""The passive-signal evaluator: windows over cumulative counters, resets, quantiles, staleness."""

from __future__ import annotations

import pytest
import yaml

from drctl.config.passive import PassiveConfig
from drctl.config.schema import parse_config
from drctl.models.passive import HistogramSnapshot, PassiveSignal, PassiveThresholds, SignalSnapshot
from drctl.models.passive_window import (
    SignalWindow,
    counter_increase,
    histogram_increase,
    merge_histograms,
    quantile,
)
from tests.support.docs_text import blocks, page

TH = PassiveThresholds(window_s=5, max_error_rate=0.2, max_ttft_p99_ms=2000, min_requests=10, max_age_s=3)
EDGES = (0.1, 0.5, 1.0, 2.5, 5.0)


def hist(*values_s: float) -> HistogramSnapshot:
    """A cumulative histogram over EDGES holding these observations."""
    return HistogramSnapshot(
        buckets=[(le, float(sum(v <= le for v in values_s))) for le in EDGES],
        count=float(len(values_s)),
        sum=sum(values_s),
    )


def snap(
    t: float,
    req: float,
    err: float = 0,
    source: str = "r1",
    kind: str = "replica",
    ttft: HistogramSnapshot | None = None,
    region: str = "us-west-1",
    **kw: float,
) -> SignalSnapshot:
    return SignalSnapshot(
        source=source,
        kind=kind,
        region=region,
        taken_at=t,  # type: ignore[arg-type]
        requests_total=req,
        errors_total=err,
        ttft=ttft,
        **kw,
    )


def test_counter_increase_counts_a_drop_as_a_restart_from_zero() -> None:
    assert counter_increase([100, 110, 130]) == 30
    # Restarted between 130 and 5: the 5 requests it served since are increase, the drop is not.
    assert counter_increase([100, 130, 5, 12]) == 30 + 5 + 7
    assert counter_increase([7]) == 0


def test_quantile_interpolates_within_a_bucket_like_histogram_quantile() -> None:
    h = HistogramSnapshot(buckets=[(0.1, 0), (0.5, 50), (1.0, 100)], count=100)
    assert quantile(0.5, h) == pytest.approx(0.5)
    assert quantile(0.25, h) == pytest.approx(0.1 + 0.4 * 25 / 50)
    assert quantile(0.99, h) == pytest.approx(0.5 + 0.5 * 49 / 50)
    # Ranks above the last finite bound give that bound; nothing observed gives nothing.
    over = HistogramSnapshot(buckets=[(0.1, 1), (0.5, 1)], count=10)
    assert quantile(0.99, over) == 0.5
    assert quantile(0.5, HistogramSnapshot(buckets=[(0.1, 0)], count=0)) is None


def test_histogram_increase_survives_a_reset_and_merges_on_common_edges() -> None:
    before, after = hist(0.05, 0.05, 3.0), hist(0.05, 0.05, 3.0, 0.3, 4.0)
    inc = histogram_increase([before, after])
    assert inc is not None and inc.count == 2 and dict(inc.buckets)[0.5] == 1 and dict(inc.buckets)[5.0] == 2
    restarted = hist(0.2)  # the replica restarted: fewer observations than before
    inc = histogram_increase([before, after, restarted])
    assert inc is not None and inc.count == 3
    coarse = HistogramSnapshot(buckets=[(1.0, 4), (5.0, 5)], count=5)
    merged = merge_histograms([hist(0.05, 2.0), coarse])
    assert merged is not None and [le for le, _ in merged.buckets] == [1.0, 5.0] and merged.count == 7


def test_error_rate_breach_makes_the_region_suspect() -> None:
    w = SignalWindow(TH)
    for i in range(7):  # reads every second: 10 req/s, from t=3 half of them fail
        w.add(snap(i, req=10 * i, err=5 * max(0, i - 3)))
    v = w.verdict("us-west-1", now=6.2)
    assert v.signal is PassiveSignal.SUSPECT, v.reason
    (rv,) = v.views
    # The window is the last 5 s: reads at t=1..6, baseline t=1.
    assert (rv.requests, rv.errors, rv.span_s) == (50, 15, 5)
    assert "error rate 30% > 20%" in v.reason


def test_healthy_traffic_is_ok_and_ttft_quantiles_come_from_bucket_deltas() -> None:
    w = SignalWindow(TH)
    old_slow = [4.0] * 50  # slow requests before the window must not count
    w.add(snap(0, req=50, ttft=hist(*old_slow)))
    w.add(snap(5, req=80, ttft=hist(*old_slow, *[0.05] * 29, 0.3)))
    v = w.verdict("us-west-1", now=5.5)
    assert v.signal is PassiveSignal.OK, v.reason
    (rv,) = v.views
    assert rv.ttft_p50_ms == pytest.approx(0.1 * 15 / 29 * 1000)
    assert rv.ttft_p99_ms is not None and 100 < rv.ttft_p99_ms <= 500
    assert v.reason == f"within thresholds: replica 30 req in 5.0s, TTFT p99 {rv.ttft_p99_ms:.0f} ms"


def test_slow_ttft_p99_breach() -> None:
    w = SignalWindow(TH)
    w.add(snap(0, req=0, ttft=hist()))
    w.add(snap(4, req=20, ttft=hist(*[0.05] * 15, *[4.0] * 5)))
    v = w.verdict("us-west-1", now=4)
    assert v.signal is PassiveSignal.SUSPECT and "TTFT p99" in v.reason
    assert v.views[0].ttft_p99_ms is not None and v.views[0].ttft_p99_ms > 2500


def test_too_little_traffic_gives_no_signal_even_when_it_all_fails() -> None:
    w = SignalWindow(TH)
    w.add(snap(0, req=100, err=0))
    w.add(snap(4, req=104, err=4))
    v = w.verdict("us-west-1", now=4)
    assert v.signal is PassiveSignal.NO_SIGNAL and "< 10 requests" in v.reason
    # A single read has no window yet.
    w2 = SignalWindow(TH)
    w2.add(snap(0, req=1000))
    assert w2.verdict("us-west-1", now=0).signal is PassiveSignal.NO_SIGNAL


def test_stale_reads_count_as_missing_not_healthy() -> None:
    w = SignalWindow(TH)
    w.add(snap(0, req=0))
    w.add(snap(4, req=100))
    assert w.verdict("us-west-1", now=4.5).signal is PassiveSignal.OK
    v = w.verdict("us-west-1", now=7.5)  # the last read is 3.5 s old
    assert v.signal is PassiveSignal.MISSING and v.missing == ["r1"] and "newer than 3s" in v.reason
    assert SignalWindow(TH).verdict("us-east-1", now=0).signal is PassiveSignal.MISSING


def test_one_stale_source_is_named_but_fresh_ones_still_judge() -> None:
    w = SignalWindow(TH)
    w.add(snap(0, req=0, source="r1"))
    w.add(snap(0, req=0, source="r2"))
    w.add(snap(4, req=30, err=20, source="r1"))
    v = w.verdict("us-west-1", now=5.5)
    assert v.signal is PassiveSignal.SUSPECT and v.missing == ["r2"] and "no fresh read from r2" in v.reason
    w.forget("us-west-1", "r2")
    assert w.verdict("us-west-1", now=5.5).missing == []


def test_replica_restart_inside_the_window_is_not_a_negative_count() -> None:
    w = SignalWindow(TH)
    w.add(snap(0, req=500, err=0))
    w.add(snap(1, req=520, err=0))
    w.add(snap(2, req=3, err=3))  # restarted; its first 3 answers were errors
    w.add(snap(3, req=23, err=3))
    (rv,) = w.verdict("us-west-1", now=3).views
    assert (rv.requests, rv.errors) == (20 + 3 + 20, 3)


def test_gateway_and_replicas_are_separate_views_and_either_can_breach() -> None:
    w = SignalWindow(TH)
    for t, req, err in ((0, 0, 0), (3, 60, 30)):
        w.add(snap(t, req=req, err=err, source="gateway:region", kind="gateway", response_time_avg_ms=40))
    for r in ("a", "b"):
        w.add(snap(0, req=0, source=r))
        w.add(snap(3, req=30, source=r))
    v = w.verdict("us-west-1", now=3)
    assert [x.kind for x in v.views] == ["gateway", "replica"]
    assert v.views[1].requests == 60 and v.views[1].sources == 2
    assert v.signal is PassiveSignal.SUSPECT and v.reason.startswith("gateway error rate 50%")


def test_gateway_mean_response_time_is_a_breach_only_when_the_window_holds_its_1024_requests() -> None:
    """HAProxy's rtime averages its last 1024 requests: with fewer in the window, a slow spell
    before the window (a fault fixed a minute ago) would still read as a breach."""
    w = SignalWindow(TH)
    w.add(snap(0, req=0, kind="gateway", response_time_avg_ms=2500))
    w.add(snap(2, req=40, kind="gateway", response_time_avg_ms=2500))
    assert w.verdict("us-west-1", now=2).signal is PassiveSignal.OK
    w.add(snap(4, req=1064, kind="gateway", response_time_avg_ms=2500))
    v = w.verdict("us-west-1", now=4)
    assert v.signal is PassiveSignal.SUSPECT and "mean response time 2500 ms" in v.reason


def test_reads_must_not_go_back_in_time() -> None:
    w = SignalWindow(TH)
    w.add(snap(2, req=0))
    with pytest.raises(ValueError, match="older than the last one"):
        w.add(snap(1, req=0))


def test_config_defaults_and_validation() -> None:
    cfg = PassiveConfig()
    th = PassiveThresholds.from_config(cfg)
    assert (th.window_s, th.max_error_rate, th.max_ttft_p99_ms, th.min_requests, th.max_age_s) == (
        3,
        0.2,
        2000,
        10,
        3,
    )
    with pytest.raises(ValueError, match="needs health.passive.prometheus.url"):
        PassiveConfig(source="prometheus")
    with pytest.raises(ValueError, match="must be longer than interval_s"):
        PassiveConfig(interval_s=5, window_s=5)
    with pytest.raises(ValueError, match="max_age_s"):
        PassiveConfig(interval_s=2, max_age_s=1)


def test_fleet_config_reports_a_bad_passive_key_by_path() -> None:
    text = """
name: f
regions: [{name: us-west-1, weight: 1, gateway_url: http://127.0.0.1:1, kube: {api_url: http://127.0.0.1:2}}]
traffic: {global_endpoint: http://127.0.0.1:3, global: {kind: route53, hosted_zone_id: Z, record_name: a.b,
          targets: {us-west-1: lb}}, regional: {kind: gateway-api}}
health: {passive: {max_error_rate: 2, window_s: 3}}
"""
    with pytest.raises(Exception) as err:
        parse_config(text, file="f.yaml")
    assert "health.passive.max_error_rate" in str(err.value)


def test_readme_documents_the_passive_defaults() -> None:
    block = next(b for b in blocks(page("docs/configuration.md"), "yaml") if "passive:" in b)
    documented = yaml.safe_load(block)["health"]["passive"]
    assert documented == PassiveConfig().model_dump(include=set(documented))


@pytest.mark.parametrize(
    ("requests", "errors", "signal"),
    [
        (10, 2, PassiveSignal.OK),  # exactly max_error_rate is not above it
        (10, 3, PassiveSignal.SUSPECT),
        (9, 9, PassiveSignal.NO_SIGNAL),
    ],  # one short of min_requests
)
def test_threshold_boundaries(requests: int, errors: int, signal: PassiveSignal) -> None:
    w = SignalWindow(TH)
    w.add(snap(0, req=0, err=0))
    w.add(snap(1, req=requests, err=errors))
    assert w.verdict("us-west-1", now=1).signal is signal


def test_freshness_and_window_edges_are_inclusive() -> None:
    w = SignalWindow(TH)
    for t, req in ((0, 0), (1, 100), (6, 130)):
        w.add(snap(t, req=req))
    # The read at t=1 sits exactly at the window's start (6 - 5): it is the baseline, t=0 is dropped.
    (rv,) = w.verdict("us-west-1", now=9).views  # 3 s old: exactly max_age_s is still fresh
    assert (rv.requests, rv.span_s) == (30, 5)
    assert w.verdict("us-west-1", now=9.01).signal is PassiveSignal.MISSING


def test_quantile_edges_and_a_reset_seen_only_in_the_buckets() -> None:
    h = HistogramSnapshot(buckets=[(0.1, 2), (0.5, 4)], count=4)
    assert quantile(1.0, h) == 0.5 and quantile(0.0, h) == 0.0
    assert quantile(1.5, h) is None and quantile(-0.1, h) is None
    # Same count, but a bucket went down: the source restarted and saw other values since.
    before = HistogramSnapshot(buckets=[(0.1, 4), (0.5, 4)], count=4, sum=0.2)
    after = HistogramSnapshot(buckets=[(0.1, 0), (0.5, 4)], count=4, sum=1.2)
    inc = histogram_increase([before, after])
    assert inc == after
    assert histogram_increase([before]) is None


def test_histogram_increase_across_a_change_of_bucket_edges() -> None:
    # A replica restarted with other edges (a new vLLM version): the restart is a reset, and only
    # the edges both reads have are kept.
    before = HistogramSnapshot(buckets=[(0.1, 5), (0.5, 8), (1.0, 9)], count=9)
    after = HistogramSnapshot(buckets=[(0.1, 1), (1.0, 2)], count=2, sum=0.4)
    inc = histogram_increase([before, after])
    assert inc is not None and inc.buckets == [(0.1, 1), (1.0, 2)] and inc.count == 2
    grown = HistogramSnapshot(buckets=[(0.1, 7), (1.0, 12), (2.0, 12)], count=12)
    inc = histogram_increase([before, grown])
    assert inc is not None and inc.buckets == [(0.1, 2), (1.0, 3)] and inc.count == 3


def test_a_read_from_before_a_gap_in_reading_is_no_baseline() -> None:
    """The watcher did not run for a minute (a paused or restarted monitor): the read before the gap
    would spread the fault's errors over a minute of old traffic. The window starts after the gap."""
    w = SignalWindow(TH)
    w.add(snap(0, req=0))
    for t in (60, 61, 62):  # 10 req/s, all failing since the gap
        w.add(snap(t, req=600 + 10 * (t - 60), err=10 * (t - 60)))
    v = w.verdict("us-west-1", now=62)
    (rv,) = v.views
    assert (rv.requests, rv.errors, rv.span_s) == (20, 20, 2), rv
    assert v.signal is PassiveSignal.SUSPECT, v.reason


def flight(t: float, *, req: float, first: float, done: float, in_flight: float) -> SignalSnapshot:
    """A replica read: `first` first tokens and `done` finished requests so far, `in_flight` now."""
    fast = [0.05] * int(first)
    return snap(t, req=req, ttft=hist(*fast), e2e=hist(*([0.5] * int(done))), in_flight=in_flight)


def test_a_stalled_replica_is_suspect_before_any_slow_first_token_is_counted() -> None:
    # 12 req/s; in flight, 1 awaits its first token and 4 are decoding. At t=2 the replica stalls:
    # requests keep arriving, none gets a first token, the 4 finish. Its TTFT histogram shows nothing slow.
    w = SignalWindow(TH)
    for t in range(3):
        w.add(flight(t, req=12 * t, first=12 * t + 4, done=12 * t, in_flight=5))
    for t in range(3, 6):  # 12 more a second, all waiting
        w.add(flight(t, req=28, first=28, done=28, in_flight=1 + 12 * (t - 2)))
    v = w.verdict("us-west-1", now=5.1)
    assert v.signal is PassiveSignal.SUSPECT, v.reason
    [view] = v.views
    # Awaiting at t=3: 13; none given a first token since, so all 13 waited the 2 s to t=5.
    assert view.stalled == 13 and view.stalled_for_s == 2
    assert "13 requests without a first token for 2.0 s" in v.reason
    # No slow first token was counted: the histogram alone would say nothing.
    assert view.ttft_p99_ms is not None and view.ttft_p99_ms < 2000


def test_requests_abandoned_after_their_first_token_are_not_taken_for_stalled_ones() -> None:
    # 40 requests were abandoned mid-stream long ago (first token counted, never finished): the balance
    # is 40 low for good. A healthy replica must not read as stalled, and a real stall still shows.
    w = SignalWindow(TH)
    for t in range(6):
        w.add(flight(t, req=100 + 12 * t, first=140 + 12 * t, done=100 + 12 * t, in_flight=5))
    ok = w.verdict("us-west-1", now=5.1)
    assert ok.signal is PassiveSignal.OK, ok.reason
    assert ok.views[0].stalled == 0
    w = SignalWindow(TH)
    for t in range(3):
        w.add(flight(t, req=100 + 12 * t, first=140 + 12 * t, done=100 + 12 * t, in_flight=0))
    for t in range(3, 6):
        w.add(flight(t, req=124, first=164, done=124, in_flight=12 * (t - 2)))
    v = w.verdict("us-west-1", now=5.1)
    assert v.signal is PassiveSignal.SUSPECT and v.views[0].stalled == 12, v.reason


def test_a_long_decode_is_not_a_stall_and_a_restart_gives_no_stall_figure() -> None:
    # 30 requests in flight, all decoding (each had its first token): nothing awaits one.
    w = SignalWindow(TH)
    for t in range(6):
        w.add(flight(t, req=12 * t, first=12 * t + 30, done=12 * t, in_flight=30))
    v = w.verdict("us-west-1", now=5.1)
    assert v.signal is PassiveSignal.OK and v.views[0].stalled == 0, v.reason
    w = SignalWindow(TH)
    w.add(flight(0, req=500, first=500, done=490, in_flight=10))
    w.add(flight(3, req=2, first=0, done=0, in_flight=20))  # restarted: counters began again
    assert w.verdict("us-west-1", now=3.1).views[0].stalled is None
