"""The rebalance's quiet wait: which readings end it (drctl/models/capacity_watch.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from drctl.config.capacity import SloConfig
from drctl.models.capacity import CapacitySpec, RegionSignals
from drctl.models.capacity_watch import CapacityWatchInput, transition

AT = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def _inp(**over: Any) -> CapacityWatchInput:
    base: dict[str, Any] = {
        "region": "us-east-1",
        "interval_s": 10.0,
        "return_after_s": 600.0,
        "spec": CapacitySpec(max_concurrency_per_replica=10, target_utilisation=0.8),
        "slo": SloConfig(ttft_p99_ms=200.0, error_rate=0.01),
        "min_requests": 10,
        "ready_replicas": 2,
        "desired_replicas": 2,
        "known": True,
    }
    return CapacityWatchInput(**(base | over))


def _sig(**over: Any) -> RegionSignals:
    base: dict[str, Any] = {
        "region": "us-east-1",
        "ready_replicas": 2,
        "desired_replicas": 2,
        "running": 4.0,
        "waiting": 0.0,
        "ttft_p99_ms": 80.0,
        "error_rate": 0.0,
        "requests": 100.0,
        "window_s": 10.0,
        "measured_at": AT,
    }
    return RegionSignals(**(base | over))


def test_a_region_within_capacity_and_objective_stays_at_rest() -> None:
    assert transition(_inp(), _sig()) == []
    # Usable is 2 x 10 x 0.8 = 16: a load of exactly 16 is within it.
    assert transition(_inp(), _sig(running=12.0, waiting=4.0)) == []
    # At the objective is not over it.
    assert transition(_inp(), _sig(ttft_p99_ms=200.0, error_rate=0.01)) == []


def test_load_over_usable_capacity_ends_the_rest() -> None:
    assert transition(_inp(), _sig(running=16.0, waiting=1.0)) == [
        "us-east-1 load 17 > usable 16 concurrency"
    ]


def test_ttft_or_errors_over_the_objective_end_the_rest() -> None:
    assert transition(_inp(), _sig(ttft_p99_ms=4000.0)) == ["us-east-1 TTFT p99 4000 ms > objective 200 ms"]
    assert transition(_inp(), _sig(error_rate=0.05)) == ["us-east-1 error rate 5.0% > objective 1.0%"]


def test_an_error_rate_over_too_few_requests_says_nothing() -> None:
    assert transition(_inp(), _sig(error_rate=1.0, requests=9.0)) == []
    assert transition(_inp(), _sig(error_rate=1.0, requests=10.0)) == [
        "us-east-1 error rate 100.0% > objective 1.0%"
    ]


@pytest.mark.parametrize(
    ("ready", "desired", "line"),
    [
        (1, 2, "us-east-1 replicas ready/desired 2/2 -> 1/2"),
        (2, 3, "us-east-1 replicas ready/desired 2/2 -> 2/3"),
        (3, 3, "us-east-1 replicas ready/desired 2/2 -> 3/3"),
    ],
)
def test_a_replica_lost_added_or_asked_for_ends_the_rest(ready: int, desired: int, line: str) -> None:
    assert transition(_inp(), _sig(ready_replicas=ready, desired_replicas=desired, running=1.0)) == [line]


def test_capacity_becoming_known_or_unknown_ends_the_rest() -> None:
    learned = CapacitySpec(target_utilisation=0.8)  # no configured capacity, no max_num_seqs: not learned yet
    assert transition(_inp(spec=learned), _sig()) == ["us-east-1 capacity no longer known"]
    assert transition(_inp(spec=learned, known=False), _sig()) == []
    # A slot ceiling the fleet learned elsewhere makes it known.
    assert transition(_inp(spec=learned, known=False, ceiling=8.0), _sig()) == [
        "us-east-1 capacity now known"
    ]


def test_every_reason_is_named_at_once() -> None:
    got = transition(_inp(), _sig(ready_replicas=1, running=9.0, ttft_p99_ms=900.0))
    assert got == [
        "us-east-1 load 9 > usable 8 concurrency",
        "us-east-1 TTFT p99 900 ms > objective 200 ms",
        "us-east-1 replicas ready/desired 2/2 -> 1/2",
    ]
