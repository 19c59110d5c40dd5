"""The capacity model: configured and learned per-replica capacity, headroom, breaches held for a window."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drctl.config.capacity import SloConfig
from drctl.config.schema import FleetConfig
from drctl.models.capacity import (
    BreachState,
    CapacitySpec,
    RegionSignals,
    breaches,
    fleet_capacities,
    region_capacity,
)

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
LEARNED = CapacitySpec(target_utilisation=0.8, ttft_p99_ms=200)


def sig(
    region: str = "us-west-1", ready: int = 2, running: float = 0, waiting: float = 0, **kw: object
) -> RegionSignals:
    return RegionSignals.model_validate(
        {
            "region": region,
            "ready_replicas": ready,
            "desired_replicas": kw.pop("desired", ready),
            "running": running,
            "waiting": waiting,
            "window_s": 5.0,
            "measured_at": T0,
            **kw,
        }
    )


def test_configured_rps_capacity_against_the_request_rate() -> None:
    c = region_capacity(sig(ready=2, running=3, load_rps=6.0), CapacitySpec(max_rps_per_replica=5))
    assert (c.unit, c.source, c.known) == ("rps", "configured", True)
    assert (c.per_replica, c.capacity, c.usable, c.load) == (5, 10, 8, 6)
    assert c.headroom == pytest.approx(2.0)
    # Every figure it used is in the evidence, for the decision log.
    assert c.evidence["load_rps"] == 6.0 and c.evidence["ready_replicas"] == 2
    assert c.evidence["headroom"] == 2.0 and c.evidence["target_utilisation"] == 0.8
    assert c.describe() == "us-west-1: load 6 of 8 rps usable (2 ready x 5 configured x utilisation)"


def test_an_rps_capacity_without_a_request_rate_is_unknown_not_idle() -> None:
    c = region_capacity(sig(ready=2, running=3), CapacitySpec(max_rps_per_replica=5))
    assert not c.known and c.headroom == 0
    assert c.problems == ["no request rate read: the rps capacity has no load to compare"]
    assert c.describe().startswith("us-west-1: capacity unknown (no request rate read")


def test_configured_concurrency_counts_the_queue_as_load() -> None:
    c = region_capacity(sig(ready=2, running=6, waiting=3), CapacitySpec(max_concurrency_per_replica=4))
    assert (c.unit, c.source, c.capacity, c.load) == ("concurrency", "configured", 8, 9)
    assert c.headroom == pytest.approx(8 * 0.8 - 9)


def test_learned_from_max_num_seqs_when_the_server_tells_it() -> None:
    c = region_capacity(sig(ready=2, running=4, max_num_seqs=8), LEARNED)
    assert (c.source, c.per_replica, c.capacity, c.ceiling) == ("learned", 8, 16, 8)
    assert c.evidence["ceiling"] == "max_num_seqs"


def test_learned_from_the_running_count_while_requests_wait() -> None:
    # Two replicas, 10 running between them and 5 waiting; the one with a queue ran 6.
    c = region_capacity(
        sig(ready=2, running=10, waiting=5, replicas_read=2, running_while_waiting=6), LEARNED
    )
    assert (c.per_replica, c.capacity, c.load, c.ceiling) == (6, 12, 15, 6)
    assert c.headroom == pytest.approx(12 * 0.8 - 15)
    assert c.evidence["ceiling"] == "running while requests wait"
    # With sums only (no per-replica figure), the average replica.
    c = region_capacity(sig(ready=2, running=8, waiting=5, replicas_read=2), LEARNED)
    assert (c.per_replica, c.ceiling) == (4, 4)
    assert c.evidence["ceiling"] == "running while requests wait (mean of the replicas)"
    # Each reading is a lower bound of the true ceiling: a higher one learned before still counts.
    c = region_capacity(
        sig(ready=2, running=10, waiting=5, running_while_waiting=6), LEARNED, known_ceiling=16
    )
    assert (c.per_replica, c.ceiling) == (16, 16) and c.evidence["ceiling"] == "learned earlier or elsewhere"


def test_learned_capacity_is_unknown_until_a_ceiling_shows() -> None:
    c = region_capacity(sig(ready=2, running=3), LEARNED)
    assert not c.known and c.ceiling is None and c.headroom == 0
    assert "capacity not learned yet" in c.problems[0]
    # A ceiling remembered from an earlier reading stands in.
    c = region_capacity(sig(ready=2, running=3), LEARNED, known_ceiling=4)
    assert c.known and c.capacity == 8 and c.ceiling == 4
    assert c.evidence["ceiling"] == "learned earlier or elsewhere"


def test_ttft_over_the_objective_caps_a_learned_capacity_below_the_running_count() -> None:
    # 3 running per replica with TTFT twice the objective: 1.5 per replica is what meets it.
    c = region_capacity(sig(ready=2, running=6, max_num_seqs=8, ttft_p99_ms=400), LEARNED)
    assert c.per_replica == pytest.approx(1.5) and c.capacity == pytest.approx(3)
    assert c.evidence["latency_bound_per_replica"] == 1.5
    assert c.ceiling == 8  # the slot ceiling is still what the servers showed


def test_no_ready_replica_is_no_capacity_not_an_unknown() -> None:
    c = region_capacity(sig(ready=0, running=0, desired=2), LEARNED)
    assert c.known and c.capacity == 0 and c.desired_replicas == 2
    c = region_capacity(sig(ready=0, load_rps=4.0), CapacitySpec(max_rps_per_replica=5))
    assert c.known and c.headroom == -4


def test_every_metrics_read_failing_leaves_the_capacity_unknown() -> None:
    c = region_capacity(sig(ready=2, replicas_read=0, problems=["replica a /metrics: timeout"]), LEARNED)
    assert not c.known and c.problems[0] == "replica a /metrics: timeout"
    # Configured capacity too: a load never read is not an idle region with room to spare.
    c = region_capacity(sig(ready=2, replicas_read=0), CapacitySpec(max_concurrency_per_replica=4))
    assert not c.known and c.headroom == 0
    assert c.problems == ["no /metrics read from the 2 ready replicas: load unknown"]


def test_a_missed_read_scales_the_load_up_to_the_ready_replicas() -> None:
    c = region_capacity(
        sig(ready=3, running=4, waiting=1, replicas_read=2), CapacitySpec(max_concurrency_per_replica=4)
    )
    assert c.load == pytest.approx(7.5) and c.capacity == 12
    assert c.evidence["load_scaled_from"] == "2 of 3 ready replicas"


def test_a_ceiling_seen_in_one_region_is_shared_with_the_others() -> None:
    west = sig("us-west-1", ready=1, running=4, waiting=6)  # queueing: 4 a replica
    east = sig("us-east-1", ready=2, running=3)  # never queued: would be unknown alone
    caps = fleet_capacities({"us-west-1": west, "us-east-1": east}, LEARNED)
    assert caps["us-east-1"].known and caps["us-east-1"].capacity == 8
    # The highest known counts: what a region remembers, or what another shows now.
    caps = fleet_capacities({"us-west-1": west, "us-east-1": east}, LEARNED, remembered={"us-east-1": 3})
    assert caps["us-east-1"].capacity == 8
    caps = fleet_capacities({"us-west-1": west, "us-east-1": east}, LEARNED, remembered={"us-east-1": 6})
    assert caps["us-east-1"].capacity == 12 and caps["us-west-1"].capacity == 4
    # Configured capacity needs nothing learned.
    caps = fleet_capacities({"us-east-1": east}, CapacitySpec(max_concurrency_per_replica=5))
    assert caps["us-east-1"].capacity == 10


def test_a_latency_bound_is_not_shared() -> None:
    gray = sig("us-west-1", ready=2, running=6, max_num_seqs=8, ttft_p99_ms=4000)
    east = sig("us-east-1", ready=2, running=3)
    caps = fleet_capacities({"us-west-1": gray, "us-east-1": east}, LEARNED)
    assert caps["us-west-1"].capacity == pytest.approx(0.3)
    assert caps["us-east-1"].capacity == 16


def test_capacity_spec_from_the_fleet_config(cfg: FleetConfig) -> None:
    spec = CapacitySpec.from_config(cfg)
    assert spec.target_utilisation == cfg.failover.rebalance_limits.target_utilisation
    assert spec.ttft_p99_ms == cfg.objectives.slo.ttft_p99_ms
    assert spec.max_concurrency_per_replica == cfg.workload.max_concurrency_per_replica


SLO = SloConfig(ttft_p99_ms=200, error_rate=0.01, window_s=10)


def test_breaches_by_kind() -> None:
    c = region_capacity(
        sig(ready=1, running=4, waiting=2, ttft_p99_ms=900, error_rate=0.05, requests=100),
        CapacitySpec(max_concurrency_per_replica=4),
    )
    assert breaches(c, SLO) == {
        "capacity": "us-west-1 load 6 > usable 3.2 concurrency",
        "ttft": "us-west-1 TTFT p99 900 ms > objective 200 ms",
        "errors": "us-west-1 error rate 5.0% > objective 1.0%",
    }
    # One failed request out of five says nothing about an error rate.
    few = c.model_copy(update={"requests": 5})
    assert "errors" not in breaches(few, SLO, min_requests=20)
    fine = region_capacity(
        sig(ready=2, running=2, ttft_p99_ms=150), CapacitySpec(max_concurrency_per_replica=4)
    )
    assert breaches(fine, SLO) == {}


def test_a_breach_counts_once_it_held_for_the_whole_window() -> None:
    s = BreachState()
    ttft = {"ttft": "us-west-1 TTFT p99 900 ms > objective 200 ms"}
    s = s.observe("us-west-1", ttft, T0)
    s = s.observe("us-west-1", {**ttft, "capacity": "short"}, T0 + timedelta(seconds=1))
    assert s.sustained(2, T0 + timedelta(seconds=1)).breaching == {}
    held = s.sustained(2, T0 + timedelta(seconds=2))
    assert held.breaching == {"us-west-1": [ttft["ttft"]]} and held.shortfall == set()
    assert s.sustained(2, T0 + timedelta(seconds=3)).shortfall == {"us-west-1"}
    # One clean reading starts the window again.
    s = s.observe("us-west-1", {}, T0 + timedelta(seconds=4)).observe(
        "us-west-1", ttft, T0 + timedelta(seconds=5)
    )
    assert s.sustained(2, T0 + timedelta(seconds=6)).breaching == {}
    assert s.sustained(2, T0 + timedelta(seconds=7)).breaching == {"us-west-1": [ttft["ttft"]]}


def test_after_a_move_the_next_step_needs_another_window() -> None:
    s = BreachState().observe("us-west-1", {"ttft": "slow"}, T0)
    assert s.sustained(2, T0 + timedelta(seconds=5)).breaching == {"us-west-1": ["slow"]}
    s = s.restart("us-west-1", T0 + timedelta(seconds=5))
    assert s.sustained(2, T0 + timedelta(seconds=6)).breaching == {}
    assert s.sustained(2, T0 + timedelta(seconds=7)).breaching == {"us-west-1": ["slow"]}
    # Other regions keep their windows; the state round-trips as workflow state must.
    s = s.observe("us-east-1", {"errors": "5xx"}, T0)
    assert BreachState.model_validate_json(s.model_dump_json()) == s
