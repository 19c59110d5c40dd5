"""The passive verdict's edges: exact reasons, strict and inclusive limits, the stalled-request floor.

drctl/models/passive.py judges a region's windowed views; these pin the words an operator reads in
a verdict and every boundary its docstrings state (a limit is breached above it, not at it).
"""

from __future__ import annotations

from drctl.models.passive import (
    HistogramSnapshot,
    PassiveSignal,
    PassiveThresholds,
    SignalSnapshot,
    WindowStats,
    judge,
    stalled_beyond,
    ttft_floor_ms,
)

TH = PassiveThresholds(window_s=5, max_error_rate=0.2, max_ttft_p99_ms=2000, min_requests=10, max_age_s=3)


def stats(**kw: object) -> WindowStats:
    base: dict[str, object] = {
        "kind": "replica",
        "span_s": 5.0,
        "sources": 1,
        "requests": 100.0,
        "errors": 0.0,
    }
    return WindowStats.model_validate({**base, **kw})


def h(count: float) -> HistogramSnapshot:
    return HistogramSnapshot(buckets=[(1.0, count)], count=count)


def read(**kw: object) -> SignalSnapshot:
    base: dict[str, object] = {
        "source": "r1",
        "kind": "replica",
        "region": "us-west-1",
        "taken_at": 0.0,
        "requests_total": 0.0,
        "errors_total": 0.0,
    }
    return SignalSnapshot.model_validate({**base, **kw})


# --- first_token_balance / error_rate ------------------------------------------------------------------


def test_first_token_balance_is_in_flight_less_first_tokens_not_yet_finished() -> None:
    assert read(in_flight=10.0, ttft=h(7), e2e=h(3)).first_token_balance() == 6.0
    assert read(in_flight=2.0, ttft=h(9), e2e=h(1)).first_token_balance() == -6.0


def test_first_token_balance_needs_all_three_figures() -> None:
    assert read(ttft=h(7), e2e=h(3)).first_token_balance() is None
    assert read(in_flight=10.0, e2e=h(3)).first_token_balance() is None
    assert read(in_flight=10.0, ttft=h(7)).first_token_balance() is None


def test_error_rate_is_unknown_without_errors_or_requests() -> None:
    assert stats(requests=40.0, errors=10.0).error_rate == 0.25
    assert stats(errors=None).error_rate is None
    assert stats(requests=0.0, errors=0.0).error_rate is None


# --- stalled_beyond / ttft_floor_ms -------------------------------------------------------------------


def test_stalled_beyond_needs_two_stalled_requests() -> None:
    assert not stalled_beyond(stats(stalled=1.0, stalled_for_s=9.0, first_tokens=0.0), 2000)
    assert not stalled_beyond(stats(stalled=1.9, stalled_for_s=9.0, first_tokens=0.0), 2000)
    assert stalled_beyond(stats(stalled=2.0, stalled_for_s=9.0, first_tokens=0.0), 2000)
    assert not stalled_beyond(stats(stalled=0.0, stalled_for_s=9.0), 2000)
    assert not stalled_beyond(stats(stalled=None, stalled_for_s=9.0), 2000)
    assert not stalled_beyond(stats(stalled=5.0, stalled_for_s=None), 2000)


def test_stalled_beyond_needs_a_wait_of_at_least_the_limit() -> None:
    assert stalled_beyond(stats(stalled=5.0, stalled_for_s=2.0, first_tokens=0.0), 2000)
    assert not stalled_beyond(stats(stalled=5.0, stalled_for_s=1.999, first_tokens=0.0), 2000)
    assert stalled_beyond(stats(stalled=5.0, stalled_for_s=0.5, first_tokens=0.0), 500)


def test_stalled_beyond_needs_over_one_percent_of_the_requests() -> None:
    # 2 stalled of 200 (198 first tokens + 2) is exactly 1 %: not over it.
    assert not stalled_beyond(stats(stalled=2.0, stalled_for_s=3.0, first_tokens=198.0), 2000)
    assert stalled_beyond(stats(stalled=2.0, stalled_for_s=3.0, first_tokens=197.0), 2000)
    assert stalled_beyond(stats(stalled=3.0, stalled_for_s=3.0, first_tokens=290.0), 2000)
    assert not stalled_beyond(stats(stalled=3.0, stalled_for_s=3.0, first_tokens=297.0), 2000)


def test_ttft_floor_is_the_p99_over_the_limit_else_the_stalled_wait() -> None:
    assert ttft_floor_ms(stats(ttft_p99_ms=2500.0), TH) == 2500.0
    assert ttft_floor_ms(stats(ttft_p99_ms=2000.0), TH) is None
    assert ttft_floor_ms(stats(ttft_p99_ms=2500.0, stalled=5.0, stalled_for_s=4.0), TH) == 2500.0
    assert ttft_floor_ms(stats(ttft_p99_ms=300.0, stalled=5.0, stalled_for_s=4.0), TH) == 4000.0
    assert ttft_floor_ms(stats(stalled=5.0, stalled_for_s=4.0), TH) == 4000.0
    assert ttft_floor_ms(stats(stalled=1.0, stalled_for_s=4.0), TH) is None
    assert ttft_floor_ms(stats(), TH) is None


# --- judge: the reasons, exactly ----------------------------------------------------------------------


def test_missing_names_the_stale_sources() -> None:
    v = judge("us-west-1", [], ["r1", "r2"], TH)
    assert (v.region, v.signal, v.missing, v.views) == ("us-west-1", PassiveSignal.MISSING, ["r1", "r2"], [])
    assert v.reason == "no passive signal newer than 3s (r1, r2)"
    assert judge("us-west-1", [], [], TH).reason == "no passive signal newer than 3s"
    th = TH.model_copy(update={"max_age_s": 2.5})
    assert judge("us-east-1", [], [], th).reason == "no passive signal newer than 2.5s"


def test_an_error_breach_names_the_counts_and_the_failed_connects() -> None:
    gw = stats(kind="gateway", requests=60.0, errors=30.0, connect_errors=3.0)
    v = judge("us-west-1", [gw], [], TH)
    assert v.signal is PassiveSignal.SUSPECT
    assert v.reason == "gateway error rate 50% > 20% (30/60, 3 failed connects)"
    assert v.ttft_floor_ms is None and v.views == [gw] and v.missing == []
    v = judge("us-west-1", [stats(requests=60.0, errors=30.0, connect_errors=0.0)], ["r9"], TH)
    assert v.reason == "replica error rate 50% > 20% (30/60); no fresh read from r9"
    assert v.missing == ["r9"]


def test_an_error_rate_at_the_limit_is_not_a_breach() -> None:
    v = judge("us-west-1", [stats(requests=50.0, errors=10.0)], [], TH)
    assert v.signal is PassiveSignal.OK
    assert v.reason == "within thresholds: replica 50 req in 5.0s, 20% 5xx"


def test_a_ttft_breach_names_the_p99_and_its_floor() -> None:
    v = judge("us-west-1", [stats(ttft_p99_ms=2500.4)], [], TH)
    assert v.signal is PassiveSignal.SUSPECT
    assert v.reason == "replica TTFT p99 2500 ms > 2000 ms"
    assert v.ttft_floor_ms == 2500.4
    assert judge("us-west-1", [stats(ttft_p99_ms=2000.0)], [], TH).signal is PassiveSignal.OK


def test_a_stall_breach_names_the_stalled_requests_and_their_wait() -> None:
    v = judge("us-west-1", [stats(requests=20.0, stalled=13.0, stalled_for_s=2.5, first_tokens=20.0)], [], TH)
    assert v.signal is PassiveSignal.SUSPECT
    assert v.reason == "replica TTFT p99 >= 2500 ms > 2000 ms: 13 requests without a first token for 2.5 s"
    assert v.ttft_floor_ms == 2500.0


def test_a_slow_p99_and_a_stall_are_one_ttft_breach() -> None:
    view = stats(ttft_p99_ms=3000.0, stalled=13.0, stalled_for_s=2.5)
    v = judge("us-west-1", [view], [], TH)
    assert v.reason == "replica TTFT p99 3000 ms > 2000 ms" and v.ttft_floor_ms == 3000.0


def test_every_breach_of_every_busy_view_is_listed_and_the_highest_floor_kept() -> None:
    gw = stats(kind="gateway", requests=2000.0, errors=1000.0, response_time_avg_ms=2600.0)
    rep = stats(requests=50.0, ttft_p99_ms=4000.0)
    rep2 = stats(requests=50.0, ttft_p99_ms=2200.0)
    v = judge("us-west-1", [gw, rep, rep2], ["x", "y"], TH)
    assert v.reason == (
        "gateway error rate 50% > 20% (1000/2000); gateway mean response time 2600 ms > 2000 ms; "
        "replica TTFT p99 4000 ms > 2000 ms; replica TTFT p99 2200 ms > 2000 ms; no fresh read from x, y"
    )
    assert v.ttft_floor_ms == 4000.0


def test_the_mean_response_time_speaks_from_1024_requests_and_only_above_the_limit() -> None:
    at = stats(kind="gateway", requests=1024.0, response_time_avg_ms=2001.0)
    assert judge("r", [at], [], TH).reason == "gateway mean response time 2001 ms > 2000 ms"
    short = stats(kind="gateway", requests=1023.0, response_time_avg_ms=2001.0)
    assert judge("r", [short], [], TH).signal is PassiveSignal.OK
    equal = stats(kind="gateway", requests=5000.0, response_time_avg_ms=2000.0)
    assert judge("r", [equal], [], TH).signal is PassiveSignal.OK


def test_stalled_requests_count_as_traffic() -> None:
    # 8 answered and 2 stalled reach min_requests (10); the stall then breaches.
    view = stats(requests=8.0, stalled=2.0, stalled_for_s=3.0, first_tokens=8.0)
    assert judge("r", [view], [], TH).signal is PassiveSignal.SUSPECT
    quiet = stats(requests=7.0, stalled=2.0, stalled_for_s=3.0, first_tokens=7.0)
    assert judge("r", [quiet], [], TH).signal is PassiveSignal.NO_SIGNAL


def test_a_quiet_view_does_not_breach_even_when_all_of_it_fails() -> None:
    quiet = stats(kind="gateway", requests=9.0, errors=9.0)
    busy = stats(requests=10.0, errors=0.0)
    v = judge("us-west-1", [quiet, busy], [], TH)
    assert v.signal is PassiveSignal.OK
    assert v.reason == "within thresholds: gateway 9 req in 5.0s, 100% 5xx, replica 10 req in 5.0s"


def test_too_little_traffic_names_the_minimum_and_every_view() -> None:
    a = stats(kind="gateway", requests=4.0, span_s=2.25, e2e_p99_ms=812.4)
    b = stats(requests=3.0, errors=None, ttft_p99_ms=95.6)
    v = judge("us-west-1", [a, b], ["r3"], TH)
    assert v.signal is PassiveSignal.NO_SIGNAL and v.views == [a, b] and v.missing == ["r3"]
    assert v.reason == (
        "too little traffic (< 10 requests): gateway 4 req in 2.2s, e2e p99 812 ms, "
        "replica 3 req in 5.0s, TTFT p99 96 ms; no fresh read from r3"
    )
    assert v.ttft_floor_ms is None


def test_ok_names_every_figure_of_each_view() -> None:
    v = judge("us-west-1", [stats(requests=400.0, errors=4.0, ttft_p99_ms=120.0, e2e_p99_ms=900.0)], [], TH)
    assert v.signal is PassiveSignal.OK and v.ttft_floor_ms is None
    assert v.reason == "within thresholds: replica 400 req in 5.0s, 1% 5xx, TTFT p99 120 ms, e2e p99 900 ms"
