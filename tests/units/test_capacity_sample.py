"""Capacity signals over a window of two readings: rates, TTFT p99, restarts, stale baselines, gauges."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from drctl.models.capacity_sample import CapacitySample, ReplicaGauges, region_signals
from drctl.models.passive import HistogramSnapshot, SignalSnapshot
from drctl.providers.prom import parse_series
from drctl.providers.vllm_metrics import replica_gauges

T0 = 1_780_000_000.0
EDGES = (0.05, 0.1, 0.25, 0.5, 1.0)


def hist(*values_s: float) -> HistogramSnapshot:
    return HistogramSnapshot(
        buckets=[(le, float(sum(v <= le for v in values_s))) for le in EDGES],
        count=len(values_s),
        sum=sum(values_s),
    )


def snap(
    name: str, t: float, req: float, err: float = 0, ttft: HistogramSnapshot | None = None
) -> SignalSnapshot:
    return SignalSnapshot(
        source=name,
        kind="replica",
        region="us-west-1",
        taken_at=t,
        requests_total=req,
        errors_total=err,
        ttft=ttft,
    )


def read(
    reads: list[tuple[SignalSnapshot, ReplicaGauges]], previous: CapacitySample | None, t: float, **kw: object
) -> tuple:
    res = region_signals(
        "us-west-1",
        reads,
        previous,
        ready=kw.pop("ready", len(reads)),  # type: ignore[arg-type]
        desired=2,
        taken_at=t,
        measured_at=datetime.fromtimestamp(t, UTC),
        max_window_s=30,
        problems=list(kw.pop("problems", [])),  # type: ignore[call-overload]
    )
    return res.signals, res.sample


def g(name: str, running: float = 0, waiting: float = 0, seqs: int | None = None) -> ReplicaGauges:
    return ReplicaGauges(name=name, running=running, waiting=waiting, max_num_seqs=seqs)


def test_the_first_reading_has_gauges_but_no_window() -> None:
    s, sample = read([(snap("a", T0, 10), g("a", 3, 1)), (snap("b", T0, 5), g("b", 2, 0))], None, T0)
    assert (s.running, s.waiting, s.replicas_read, s.window_s) == (5, 1, 2, 0)
    assert s.load_rps is None and s.ttft_p99_ms is None and s.error_rate is None and s.requests is None
    assert sample.taken_at == T0 and [r.source for r in sample.replicas] == ["a", "b"]


def test_rates_and_ttft_p99_come_from_the_increase_between_readings() -> None:
    _, first = read(
        [(snap("a", T0, 10, 0, hist(0.02)), g("a")), (snap("b", T0, 5, 0, hist()), g("b"))], None, T0
    )
    # 5 s later: a served 30 more (2 of them 5xx), b 20 more; 49 first tokens fast and one at 0.8 s.
    fast = [0.02] * 49
    reads = [
        (snap("a", T0 + 5, 40, 2, hist(0.02, *fast[:29], 0.8)), g("a", 4, 2)),
        (snap("b", T0 + 5, 25, 0, hist(*fast[29:])), g("b", 4, 0)),
    ]
    s, _ = read(reads, first, T0 + 5)
    assert (s.requests, s.load_rps, s.window_s) == (50, 10, 5)
    assert s.error_rate == pytest.approx(2 / 50)
    # The p99 rank (49.5 of 50) falls in the 0.5..1.0 bucket: interpolated as histogram_quantile does.
    assert s.ttft_p99_ms == pytest.approx(750)
    assert (s.running, s.waiting, s.running_while_waiting) == (8, 2, 4)


def test_a_restarted_replica_counts_from_zero_and_a_new_one_is_in_the_next_window() -> None:
    _, first = read([(snap("a", T0, 100), g("a"))], None, T0)
    reads = [(snap("a", T0 + 2, 6), g("a", 1)), (snap("c", T0 + 2, 500), g("c", 2))]
    s, sample = read(reads, first, T0 + 2)
    # c's rate starts with the next window; until then a's stands for both ready replicas.
    assert s.requests == 6 and s.load_rps == 6 and s.running == 3
    assert s.problems == ["request rate from 1 of 2 ready replicas, scaled up"]
    assert {r.source for r in sample.replicas} == {"a", "c"}  # c is in the next window


def test_a_rate_from_some_of_the_ready_replicas_is_scaled_up() -> None:
    _, first = read([(snap("a", T0, 0), g("a"))], None, T0, ready=2)
    s, _ = read([(snap("a", T0 + 2, 10), g("a"))], first, T0 + 2, ready=2)
    assert s.requests == 10 and s.load_rps == 10  # 5 rps read from one of two replicas
    assert s.problems == ["request rate from 1 of 2 ready replicas, scaled up"]


def test_a_stale_or_foreign_baseline_gives_no_window() -> None:
    _, first = read([(snap("a", T0, 10), g("a"))], None, T0)
    s, _ = read([(snap("a", T0 + 120, 20), g("a"))], first, T0 + 120)
    assert s.load_rps is None and s.window_s == 0
    assert s.problems == ["previous sample is 120.0s old, outside (0, 30]s: no window yet"]
    # A clock that went backwards (another worker's) is no baseline either.
    s, _ = read([(snap("a", T0 - 1, 20), g("a"))], first, T0 - 1)
    assert s.load_rps is None and "no window yet" in s.problems[0]


def test_the_smallest_max_num_seqs_reported_is_the_regions() -> None:
    s, _ = read([(snap("a", T0, 0), g("a", seqs=16)), (snap("b", T0, 0), g("b", seqs=8))], None, T0)
    assert s.max_num_seqs == 8
    s, _ = read([], None, T0, ready=2, problems=["replica a: timeout"])
    assert (s.replicas_read, s.ready_replicas, s.running, s.problems) == (0, 2, 0, ["replica a: timeout"])


def test_replica_gauges_of_either_engine_generation() -> None:
    v1 = (
        'vllm:num_requests_running{engine="0",model_name="m"} 3\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 2\n'
        'vllm:num_requests_waiting{engine="0",model_name="m"} 4\n'
        'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="661"} 1\n'
    )
    assert replica_gauges(parse_series(v1)) == (5, 4, None)
    told = v1 + 'vllm:scheduler_config_info{engine="0",max_num_seqs="64"} 1\n'
    assert replica_gauges(parse_series(told)) == (5, 4, 64)
    bad = 'vllm:scheduler_config_info{max_num_seqs="lots"} 1\nvllm:num_requests_running{model_name="m"} 1\n'
    assert replica_gauges(parse_series(bad)) == (1, 0, None)
    assert replica_gauges(parse_series("")) == (0, 0, None)
