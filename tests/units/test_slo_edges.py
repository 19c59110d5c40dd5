"""RTO to the objective (drctl.models.slo) at its edges: each figure, each boundary, each line of text."""

from __future__ import annotations

from datetime import UTC, datetime

from drctl.models.passive import HistogramSnapshot, SignalSnapshot
from drctl.models.slo import (
    MIN_TRAFFIC_SHARE,
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
EDGES = (0.04, 0.1, 0.25, 0.5, 1.0)


def read(name: str, requests: float, errors: float | None, *ttfts_s: float) -> SignalSnapshot:
    """One replica's cumulative counters after serving `ttfts_s` (no TTFT histogram when none)."""
    ttft = (
        HistogramSnapshot(
            buckets=[(le, float(sum(v <= le for v in ttfts_s))) for le in EDGES],
            count=float(len(ttfts_s)),
            sum=sum(ttfts_s),
        )
        if ttfts_s
        else None
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


def iv(
    start: float, requests: float = 20, errors: float | None = 0, p99: float | None = 50.0, length: float = 1
) -> SloInterval:
    return SloInterval(start_s=start, end_s=start + length, requests=requests, errors=errors, ttft_p99_ms=p99)


# --- one interval ------------------------------------------------------------------------------


def test_error_rate_needs_both_an_error_counter_and_requests() -> None:
    assert iv(0, requests=20, errors=5).error_rate == 0.25
    assert iv(0, requests=1, errors=1).error_rate == 1.0
    assert iv(0, requests=0.5, errors=0).error_rate == 0.0
    assert iv(0, requests=0, errors=0).error_rate is None
    assert iv(0, requests=20, errors=None).error_rate is None


def test_breaches_are_strictly_over_the_objective() -> None:
    assert iv(0, p99=200, requests=100, errors=1).breaches(OBJ) == []  # 200 ms and 1 % are within
    assert iv(0, p99=None, errors=None).breaches(OBJ) == []
    assert iv(0, p99=200.4).breaches(OBJ) == ["ttft_p99 200 ms > 200 ms"]
    assert iv(0, errors=0.3).breaches(OBJ) == ["error_rate 1.5% > 1.0% (0.3/20)"]
    obj = SloObjective(ttft_p99_ms=150.5, error_rate=0.005, window_s=3)
    assert iv(0, requests=8, errors=1, p99=1234.56).breaches(obj) == [
        "ttft_p99 1235 ms > 150.5 ms",
        "error_rate 12.5% > 0.5% (1/8)",
    ]


def test_an_interval_with_its_times_rounded_to_the_millisecond() -> None:
    before = {"a": read("a", 10, 0, *[0.03] * 10)}
    after = {"a": read("a", 20, 0, *[0.03] * 20)}
    got = slo_interval(before, after, 1.23456, 2.34561)
    assert (got.start_s, got.end_s) == (1.235, 2.346)
    assert got.model_dump() == {
        "start_s": 1.235,
        "end_s": 2.346,
        "requests": 10.0,
        "errors": 0.0,
        "ttft_p99_ms": 39.6,  # rank 9.9 of 10 in (0, 0.04]
        "replicas": 1,
    }


def test_the_p99_is_interpolated_and_kept_to_a_tenth_of_a_millisecond() -> None:
    # 100 new observations, 3 of them in (0.25, 0.5]: rank 99 is 2/3 into that bucket.
    before = {"a": read("a", 0, 0, 0.03)}
    after = {"a": read("a", 100, 0, 0.03, *[0.03] * 97, *[0.3] * 3)}
    assert slo_interval(before, after, 0, 1).ttft_p99_ms == 416.7


def test_errors_add_up_over_replicas_and_one_without_a_counter_makes_them_unknown() -> None:
    before = {"a": read("a", 10, 0, 0.03), "b": read("b", 10, 1, 0.03)}
    after = {"a": read("a", 20, 2, 0.03), "b": read("b", 30, 4, 0.03)}
    got = slo_interval(before, after, 0, 1)
    assert (got.requests, got.errors, got.replicas) == (30.0, 5.0, 2)
    # A replica with no error counter at either read: the interval's errors are unknown, not 0.
    for a_before, a_after in ((None, 2), (0, None), (None, None)):
        before = {"a": read("a", 10, a_before, 0.03), "b": read("b", 10, 1, 0.03)}
        after = {"a": read("a", 20, a_after, 0.03), "b": read("b", 30, 4, 0.03)}
        got = slo_interval(before, after, 0, 1)
        assert (got.requests, got.errors) == (30.0, None), (a_before, a_after)
    # Unknown stays unknown whichever replica comes first.
    before = {"a": read("a", 10, 0, 0.03), "b": read("b", 10, None, 0.03)}
    after = {"a": read("a", 20, 2, 0.03), "b": read("b", 30, None, 0.03)}
    assert slo_interval(before, after, 0, 1).errors is None


def test_a_replica_without_a_ttft_histogram_at_either_read_adds_no_latency() -> None:
    before = {"a": read("a", 10, 0), "b": read("b", 10, 0, 0.03)}
    after = {"a": read("a", 20, 0, *[0.9] * 5), "b": read("b", 30, 0, *[0.03] * 21)}
    got = slo_interval(before, after, 0, 1)
    assert got.requests == 30 and got.ttft_p99_ms == 39.6  # b's 20 alone: rank 19.8 of 20 in (0, 0.04]
    # No replica with a histogram at both reads: no first token to judge.
    got = slo_interval({"a": read("a", 10, 0)}, {"a": read("a", 20, 0, 0.03)}, 0, 1)
    assert got.ttft_p99_ms is None and got.requests == 10
    # None read at both ends: nothing at all.
    got = slo_interval({"a": read("a", 1, 0)}, {"b": read("b", 2, 0)}, 0, 1)
    assert got.model_dump() == {
        "start_s": 0,
        "end_s": 1,
        "requests": 0.0,
        "errors": 0.0,
        "ttft_p99_ms": None,
        "replicas": 0,
    }


def test_an_interval_has_no_latency_or_replicas_unless_given() -> None:
    got = SloInterval(start_s=0, end_s=1, requests=0, errors=None)
    assert (got.ttft_p99_ms, got.replicas) == (None, 0)


# --- held for the window -----------------------------------------------------------------------


def test_a_breach_starts_the_run_and_its_figures_again() -> None:
    # Before the breach: 1 slow-ish interval with errors within the objective. After: clean.
    intervals = [
        iv(1, requests=100, errors=0.9, p99=180),
        iv(2, p99=900),
        iv(3, p99=None),
        iv(4, p99=None),
        iv(5, p99=None),
    ]
    got = judge_slo(intervals, OBJ)
    assert (got.restored_s, got.held_s, got.judged) == (3, 3, True)
    assert got.evidence == (
        "ttft_p99 <= - (objective 200 ms) and error_rate 0.0% (objective 1.0%) held 3.0s, 60 requests"
    )


def test_errors_unknown_start_the_run_and_its_figures_again() -> None:
    intervals = [iv(1, requests=100, errors=0.9, p99=180), iv(2, errors=None), iv(3, p99=20), iv(4), iv(5)]
    got = judge_slo(intervals, OBJ)
    assert (got.restored_s, got.held_s) == (3, 3)
    assert got.evidence == (
        "ttft_p99 <= 50 ms (objective 200 ms) and error_rate 0.0% (objective 1.0%) held 3.0s, 60 requests"
    )


def test_the_evidence_of_a_held_run_carries_its_worst_p99_and_its_error_rate() -> None:
    obj = SloObjective(ttft_p99_ms=250.5, error_rate=0.025, window_s=2.5)
    intervals = [iv(1.23456, requests=40, errors=0.5, p99=120, length=0.5), iv(1.73456, requests=60, errors=1.5,
                 p99=0.4, length=2.0004)]  # fmt: skip
    got = judge_slo(intervals, obj)
    assert (got.restored_s, got.held_s) == (1.235, 2.5)  # both to the millisecond
    assert got.evidence == (
        "ttft_p99 <= 120 ms (objective 250.5 ms) and error_rate 2.0% (objective 2.5%) held 2.5s, 100 requests"
    )
    # The worst of tiny latencies is still a latency.
    got = judge_slo([iv(1, p99=0.4), iv(2, p99=None), iv(3, p99=0.2)], OBJ)
    assert got.evidence.startswith("ttft_p99 <= 0 ms (objective 200 ms)")
    # No first token in the whole run: no latency to show.
    got = judge_slo([iv(1, p99=None), iv(2, p99=None), iv(3, p99=None)], OBJ)
    assert got.restored_s == 1 and got.evidence.startswith("ttft_p99 <= - (objective 200 ms)")


def test_a_run_holds_at_the_window_exactly() -> None:
    obj = SloObjective(ttft_p99_ms=200, error_rate=0.01, window_s=0.3)
    got = judge_slo([iv(0, length=0.1), iv(0.1, length=0.1), iv(0.2, length=0.1)], obj)
    assert got.restored_s == 0 and got.held_s == 0.3
    # A run short of the window by no more than floating point's slack (1e-9 s) holds it.
    got = judge_slo([iv(0, length=3 - 1e-9)], OBJ)
    assert got.restored_s == 0 and got.held_s == 3
    # Any shorter is not.
    got = judge_slo([iv(0, length=0.1), iv(0.1, length=0.1), iv(0.2, length=0.099)], obj)
    assert got.restored_s is None


def test_a_single_request_counts_towards_the_run() -> None:
    got = judge_slo([iv(1, requests=1), iv(2, requests=1), iv(3, requests=1)], OBJ)
    assert got.restored_s == 1 and got.evidence.endswith("held 3.0s, 3 requests")


def test_not_restored_names_every_metric_that_breached_last() -> None:
    got = judge_slo([iv(1, p99=412, errors=1), iv(2.25)], OBJ)
    assert got.restored_s is None and got.held_s == 1 and got.judged
    assert got.evidence == "ttft_p99 412 ms > 200 ms; error_rate 5.0% > 1.0% (1/20) at 2.0s"


def test_a_breach_is_named_before_an_unknown_error_rate() -> None:
    got = judge_slo([iv(1, p99=412), iv(2, errors=None)], OBJ)
    assert got.evidence == "ttft_p99 412 ms > 200 ms at 2.0s"
    got = judge_slo([iv(1, errors=None), iv(2, p99=412)], OBJ)
    assert got.evidence == "ttft_p99 412 ms > 200 ms at 3.0s"


def test_an_unknown_error_rate_is_not_restored_and_says_why() -> None:
    got = judge_slo([iv(1), iv(2, errors=None), iv(3.25)], OBJ)
    assert (got.restored_s, got.held_s, got.judged) == (None, 1, True)
    assert got.evidence == (
        "error rate unknown at 3.0s: the replicas' metrics have no error counter (http_requests_total; "
        "vLLM before 2025 exports none), so the objective cannot be shown to hold"
    )
    # Even when the load was too thin to judge otherwise.
    thin = [iv(t, requests=0) for t in range(1, 10)] + [iv(10, errors=None)]
    got = judge_slo(thin, OBJ)
    assert got.judged and got.evidence.startswith("error rate unknown at 11.0s")


def test_too_short_a_watch_says_how_long_it_held() -> None:
    got = judge_slo([iv(1, length=0.25), iv(1.25, length=0.5004)], OBJ)
    assert (got.restored_s, got.held_s, got.judged) == (None, 0.75, True)  # to the millisecond
    assert got.evidence == "within the objective for only 0.8s of the 3s window"
    assert judge_slo([], OBJ).evidence == "within the objective for only 0.0s of the 3s window"


def test_no_traffic_judgement_keeps_what_held() -> None:
    obj = SloObjective(ttft_p99_ms=200, error_rate=0.01, window_s=4)
    quiet = [
        iv(1, requests=0),
        iv(2, requests=1, length=0.5004),
        *(iv(t, requests=0) for t in (2.5004, 3.5004, 4.5004)),
    ]
    got = judge_slo(quiet, obj)
    assert (got.restored_s, got.held_s, got.judged) == (None, 0.5, False)
    assert got.evidence == (
        "requests answered in only 0.5s of the last 4.5s (1: a trickle such as drctl's own probes, "
        "not a load), none outside the objective"
    )


# --- no traffic --------------------------------------------------------------------------------


def test_no_traffic_only_once_a_whole_window_was_watched() -> None:
    quiet = [iv(t, requests=0) for t in range(3)]
    assert no_traffic([], 3) is None
    assert no_traffic(quiet[:2], 3) is None
    assert no_traffic(quiet, 3) == "no request reached the target's replicas"
    # A window's worth give or take floating point: 0.1 + 0.2 is a hair over 0.3.
    tenths = [iv(0, requests=0, length=0.1), iv(0.1, requests=0, length=0.2)]
    assert no_traffic(tenths, 0.3) == "no request reached the target's replicas"
    hair = [iv(0, requests=0, length=0.1), iv(0.1, requests=0, length=0.19)]
    assert no_traffic(hair, 0.3) is None
    # Short of the window by no more than the slack (1e-9 s) is the whole window.
    assert no_traffic([iv(0, requests=0, length=3 - 1e-9)], 3) == "no request reached the target's replicas"
    # What was watched is from the first read's start to the last read's end.
    assert no_traffic([iv(5, requests=0), iv(6, requests=0)], 3) is None
    assert no_traffic([iv(5, requests=0), iv(6, requests=0), iv(7, requests=0)], 3) is not None


def test_no_traffic_looks_at_the_last_window_only() -> None:
    # Busy long ago, then a probe now and then for the last 4 s.
    intervals = [iv(t) for t in range(6)] + [iv(6, requests=2), iv(7, requests=0), iv(8, requests=0),
                                             iv(9, requests=0)]  # fmt: skip
    assert no_traffic(intervals, 4) == (
        "requests answered in only 1.0s of the last 4.0s (2: a trickle such as drctl's own probes, "
        "not a load), none outside the objective"
    )
    # Load in exactly half of the last window is a load.
    half = [iv(0), iv(1, requests=0), iv(2, requests=3), iv(3, requests=0)]
    assert no_traffic(half, 4) is None
    assert MIN_TRAFFIC_SHARE == 0.5
    # An interval ending where the last window starts (within the 1e-9 s slack) is not in it.
    start = 10 - 4 + 1e-9
    before_it = SloInterval(start_s=0, end_s=start, requests=60, errors=0)
    in_it = SloInterval(start_s=start, end_s=10, requests=0, errors=0)
    assert no_traffic([before_it, in_it], 4) == (
        "requests answered in only 0.0s of the last 4.0s (0: a trickle such as drctl's own probes, "
        "not a load), none outside the objective"
    )
    assert idle(half[1:2]) and not idle(half) and idle([])


# --- the watch's result ------------------------------------------------------------------------


def test_summary_of_each_outcome() -> None:
    def result(**kw: object) -> SloWatchResult:
        return SloWatchResult.model_validate(
            {"region": "us-east-1", "evidence": "why", "observed_s": 12.25, **kw}
        )

    assert result(met=True, restored_s=7.25).summary(30) == "restored 7.2s after the fault: why"
    assert result(met=False, restored_s=31.25).summary(30.5) == (
        "not restored within 30.5s: restored only 31.2s after the fault"
    )
    assert result(met=False).summary(30) == "not restored within 30s: why"
    # Met with no time restored cannot be claimed as restored.
    assert result(met=True).summary(30) == "not restored within 30s: why"
    assert result(met=None).summary(30) == "no traffic to judge in 12.2s of watching: why"
    assert result(met=None, started_s=2).summary(30) == "no traffic to judge in 10.2s of watching: why"
    r = result(met=None)
    assert (r.restored_s, r.started_s, r.intervals, r.read_errors) == (None, 0.0, [], {})


def test_the_watch_ends_a_window_and_a_read_after_the_rto_target() -> None:
    obj = SloObjective(ttft_p99_ms=200, error_rate=0.01, window_s=10)
    inp = SloWatchInput(
        region="us-east-1", objective=obj, fault_at=datetime.now(UTC), within_s=30, interval_s=2.5
    )
    assert observe_until_s(inp) == 42.5
    assert SloWatchInput(region="r", objective=OBJ, fault_at=datetime.now(UTC), within_s=0).interval_s == 1.0
