"""RTO to the objective, the pure part: interval figures from two reads, and "held for the window"."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from drctl.config.capacity import SloConfig
from drctl.models.passive import HistogramSnapshot, SignalSnapshot
from drctl.models.slo import (
    SloInterval,
    SloObjective,
    SloWatchInput,
    SloWatchResult,
    idle,
    judge_slo,
    no_traffic,
    observe_until_s,
    slo_interval,
)

OBJ = SloObjective(ttft_p99_ms=200, error_rate=0.01, window_s=3)
EDGES = (0.04, 0.1, 0.25, 0.5, 1.0)  # a slice of vLLM's TTFT edges


def read(name: str, requests: float, errors: float, *ttfts_s: float) -> SignalSnapshot:
    """One replica's cumulative counters after serving `ttfts_s` (TTFT histogram over EDGES)."""
    ttft = HistogramSnapshot(
        buckets=[(le, float(sum(v <= le for v in ttfts_s))) for le in EDGES],
        count=float(len(ttfts_s)),
        sum=sum(ttfts_s),
    )
    return SignalSnapshot(
        source=name,
        kind="replica",
        region="us-east-1",
        taken_at=0.0,
        requests_total=requests,
        errors_total=errors,
        ttft=ttft,
    )


def iv(start: float, requests: float = 20, errors: float = 0, p99: float | None = 50.0) -> SloInterval:
    return SloInterval(start_s=start, end_s=start + 1, requests=requests, errors=errors, ttft_p99_ms=p99)


def test_interval_sums_bucket_deltas_over_replicas_and_skips_a_replica_read_once() -> None:
    before = {"a": read("a", 10, 0, *[0.03] * 10), "b": read("b", 5, 0, *[0.03] * 5)}
    # Since then: a answered 9 fast and 1 slow (0.4 s), b 10 more at 0.03 s; c is new (no baseline).
    after = {
        "a": read("a", 20, 1, *[0.03] * 19, 0.4),
        "b": read("b", 15, 0, *[0.03] * 15),
        "c": read("c", 100, 100, *[0.9] * 100),
    }
    got = slo_interval(before, after, 4.0, 5.0)
    assert (got.requests, got.errors, got.replicas, got.start_s, got.end_s) == (20, 1, 2, 4.0, 5.0)
    # 20 new observations, one in (0.25, 0.5]: rank 19.8 lands in that bucket, interpolated.
    assert got.ttft_p99_ms == pytest.approx((0.25 + 0.25 * 0.8) * 1000)
    assert got.breaches(OBJ) == ["ttft_p99 450 ms > 200 ms", "error_rate 5.0% > 1.0% (1/20)"]


def test_a_restarted_replica_counts_its_new_totals_as_increase() -> None:
    before = {"a": read("a", 500, 3, *[0.03] * 500)}
    after = {"a": read("a", 4, 0, *[0.03] * 4)}
    got = slo_interval(before, after, 0, 1)
    assert (got.requests, got.errors) == (4, 0) and got.ttft_p99_ms is not None and got.ttft_p99_ms <= 40


def test_restored_at_the_start_of_the_first_run_that_holds_the_window() -> None:
    intervals = [iv(5, p99=900), iv(6, p99=150), iv(7, p99=900), iv(8), iv(9), iv(10), iv(11)]
    got = judge_slo(intervals, OBJ)
    # 6 s is within but alone; 8..11 holds 3 s from 8 s.
    assert got.restored_s == 8 and got.held_s == 3
    assert got.evidence == (
        "ttft_p99 <= 50 ms (objective 200 ms) and error_rate 0.0% (objective 1.0%) held 3.0s, 60 requests"
    )


def test_idle_intervals_neither_break_a_run_nor_count_towards_it() -> None:
    quiet = dict(requests=0, p99=None)
    intervals = [iv(1, **quiet), iv(2), iv(3, **quiet), iv(4)]
    got = judge_slo(intervals, OBJ)
    # 2 s of traffic (2..3 and 4..5) in a 3 s window: a lull must not pass for the objective holding.
    assert got.restored_s is None and got.held_s == 2 and got.judged
    assert got.evidence == "within the objective for only 2.0s of the 3s window"
    assert judge_slo([*intervals, iv(5)], OBJ).restored_s == 2
    silent = [iv(t, **quiet) for t in range(1, 6)]
    assert idle(silent) and not idle(intervals)
    got = judge_slo(silent, OBJ)
    assert (got.evidence, got.judged) == ("no request reached the target's replicas", False)


def test_a_trickle_of_requests_is_no_traffic_to_judge_not_outside_the_objective() -> None:
    """An idle stack whose only requests are drctl's own probes: "no traffic to judge", said after
    one window, never "within the objective for only 4.1s of the 10s window"."""
    quiet = dict(requests=0, p99=None)
    obj = SloObjective(ttft_p99_ms=200, error_rate=0.01, window_s=10)
    # A probe answered every third second, each within the objective.
    trickle = [iv(t, requests=1) if t % 3 == 0 else iv(t, **quiet) for t in range(1, 12)]
    got = judge_slo(trickle, obj)
    assert got.restored_s is None and not got.judged
    assert got.evidence == (
        "requests answered in only 3.0s of the last 10.0s (3: a trickle such as drctl's own probes, "
        "not a load), none outside the objective"
    )
    # Before a whole window was watched nothing is concluded: the load may be on its way.
    assert no_traffic(trickle[:5], 10) is None
    # Load in at least half the window is judged: here it holds, so it is restored.
    steady = [iv(t) if t % 2 else iv(t, **quiet) for t in range(1, 22)]
    assert no_traffic(steady, 10) is None and judge_slo(steady, obj).restored_s == 1
    # A breach is judged however thin the load: the verdict names it, it is not "no traffic".
    slow = judge_slo([*trickle, iv(12, requests=1, p99=900)], obj)
    assert slow.judged and slow.evidence == "ttft_p99 900 ms > 200 ms at 13.0s"
    res = SloWatchResult(region="us-east-1", met=None, evidence=got.evidence, started_s=8, observed_s=19)
    assert res.summary(30).startswith(
        "no traffic to judge in 11.0s of watching: requests answered in only 3.0s"
    )


def test_not_restored_names_the_metric_that_breached_last() -> None:
    intervals = [iv(1), iv(2, p99=412), iv(3, errors=5), iv(4)]
    got = judge_slo(intervals, OBJ)
    assert got.restored_s is None and got.held_s == 1  # only 4..5 since the last breach
    assert got.evidence == "error_rate 25.0% > 1.0% (5/20) at 4.0s"
    slow = judge_slo([iv(1, p99=412)], OBJ)
    assert slow.evidence == "ttft_p99 412 ms > 200 ms at 2.0s"
    res = SloWatchResult(region="us-east-1", met=False, evidence=slow.evidence, observed_s=2)
    assert res.summary(30) == "not restored within 30s: ttft_p99 412 ms > 200 ms at 2.0s"
    late = SloWatchResult(region="us-east-1", restored_s=31.5, met=False, evidence="x", observed_s=40)
    assert late.summary(30) == "not restored within 30s: restored only 31.5s after the fault"
    quiet = SloWatchResult(
        region="us-east-1", met=None, evidence="no request reached the target's replicas", started_s=8,
        observed_s=11.5,
    )  # fmt: skip
    assert (
        quiet.summary(30)
        == "no traffic to judge in 3.5s of watching: no request reached the target's replicas"
    )


def test_objective_from_config_and_the_watch_bound() -> None:
    obj = SloObjective.from_config(SloConfig(ttft_p99_ms=150, window_s=10))
    assert (obj.ttft_p99_ms, obj.error_rate, obj.window_s) == (150, 0.01, 10)
    inp = SloWatchInput(region="us-east-1", objective=obj, fault_at=datetime.now(UTC), within_s=30)
    # A run must start by the RTO target and then hold the window; one read interval of slack.
    assert observe_until_s(inp) == 30 + 10 + 1
