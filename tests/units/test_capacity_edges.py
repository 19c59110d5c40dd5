"""The capacity model's edges: exact evidence, boundaries of the slot ceiling, the latency bound, breaches.

Each test pins a figure or a boundary docs/rebalancing.md and drctl/models/capacity.py describe
(the evidence every decision is logged with, where a comparison is strict, what a breach says).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drctl.config.capacity import RebalanceLimits, SloConfig
from drctl.config.schema import FleetConfig
from drctl.models.capacity import (
    BreachState,
    CapacitySpec,
    RebalancePlan,
    RegionCapacity,
    RegionSignals,
    breaches,
    fleet_capacities,
    plan_rebalance,
    region_capacity,
    slot_ceiling,
)

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
LEARNED = CapacitySpec(target_utilisation=0.8, ttft_p99_ms=200)
SLO = SloConfig(ttft_p99_ms=200, error_rate=0.01, window_s=10)


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


def cap(**kw: object) -> RegionCapacity:
    base: dict[str, object] = {
        "region": "us-west-1",
        "capacity": 10.0,
        "load": 8.0,
        "usable": 8.0,
        "headroom": 0.0,
        "unit": "concurrency",
        "per_replica": 5.0,
        "source": "configured",
    }
    return RegionCapacity.model_validate({**base, **kw})


# --- describe / from_config ---------------------------------------------------------------------------


def test_describe_an_unknown_capacity_names_its_problems_or_says_no_signal() -> None:
    assert cap(known=False).describe() == "us-west-1: capacity unknown (no signal)"
    two = cap(known=False, problems=["replica a /metrics: timeout", "no request rate read"])
    assert two.describe() == "us-west-1: capacity unknown (replica a /metrics: timeout; no request rate read)"


def test_describe_a_learned_concurrency_capacity() -> None:
    c = region_capacity(sig(ready=3, running=4, max_num_seqs=8), LEARNED)
    assert c.describe() == "us-west-1: load 4 of 19.2 concurrency usable (3 ready x 8 learned x utilisation)"


def test_capacity_spec_copies_every_setting_from_the_fleet_config(cfg: FleetConfig) -> None:
    workload = cfg.workload.model_copy(update={"max_rps_per_replica": 7.5, "max_concurrency_per_replica": 6})
    limits = cfg.failover.rebalance_limits.model_copy(update={"target_utilisation": 0.65})
    failover = cfg.failover.model_copy(update={"rebalance_limits": limits})
    slo = cfg.objectives.slo.model_copy(update={"ttft_p99_ms": 345.0})
    objectives = cfg.objectives.model_copy(update={"slo": slo})
    changed = cfg.model_copy(update={"workload": workload, "failover": failover, "objectives": objectives})
    assert CapacitySpec.from_config(changed) == CapacitySpec(
        max_rps_per_replica=7.5, max_concurrency_per_replica=6, target_utilisation=0.65, ttft_p99_ms=345.0
    )


# --- slot_ceiling -----------------------------------------------------------------------------------


def test_slot_ceiling_max_num_seqs_first_as_a_float() -> None:
    got = slot_ceiling(sig(running=3, waiting=2, max_num_seqs=8, running_while_waiting=5))
    assert got == (8.0, "max_num_seqs") and isinstance(got[0], float)


def test_slot_ceiling_from_a_replica_that_ran_while_requests_waited() -> None:
    assert slot_ceiling(sig(running=3, waiting=2, running_while_waiting=5)) == (
        5,
        "running while requests wait",
    )
    # Zero running while waiting shows no ceiling: the sums decide (here: no queue, nothing).
    assert slot_ceiling(sig(running=3, running_while_waiting=0)) == (None, "")


def test_slot_ceiling_from_the_sums_is_the_average_replica_read() -> None:
    mean = "running while requests wait (mean of the replicas)"
    # Over the replicas read when told, else over the ready ones.
    assert slot_ceiling(sig(ready=3, running=6, waiting=1, replicas_read=2)) == (3.0, mean)
    assert slot_ceiling(sig(ready=3, running=6, waiting=1)) == (2.0, mean)
    # Any queue at all counts, and any running count.
    assert slot_ceiling(sig(ready=2, running=4, waiting=0.5)) == (2.0, mean)
    assert slot_ceiling(sig(ready=2, running=0.5, waiting=3)) == (0.25, mean)


def test_slot_ceiling_shows_none_without_a_queue_a_running_count_or_a_replica() -> None:
    assert slot_ceiling(sig(ready=2, running=4, waiting=0)) == (None, "")
    assert slot_ceiling(sig(ready=2, running=0, waiting=3)) == (None, "")
    assert slot_ceiling(sig(ready=0, running=1, waiting=1)) == (None, "")
    assert slot_ceiling(sig(ready=2, running=1, waiting=1, replicas_read=0)) == (None, "")


# --- region_capacity: the evidence, exactly ----------------------------------------------------------


def test_the_evidence_of_a_configured_rps_capacity() -> None:
    c = region_capacity(
        sig(ready=2, running=3, waiting=1, load_rps=6.1234567, error_rate=0.0123456789, requests=40.0),
        CapacitySpec(max_rps_per_replica=5, target_utilisation=0.9),
    )
    assert c.evidence == {
        "ready_replicas": 2,
        "desired_replicas": 2,
        "running": 3.0,
        "waiting": 1.0,
        "target_utilisation": 0.9,
        "window_s": 5.0,
        "error_rate": 0.012346,
        "load_rps": 6.123457,
        "requests": 40.0,
        "per_replica": 5.0,
        "capacity": 10.0,
        "usable": 9.0,
        "load": 6.123,
        "headroom": 2.877,
    }
    assert (c.capacity, c.usable, c.per_replica, c.load) == (10.0, 9.0, 5.0, 6.1234567)
    assert c.headroom == pytest.approx(9.0 - 6.1234567)
    assert (c.error_rate, c.requests, c.ttft_p99_ms) == (0.0123456789, 40.0, None)
    assert (c.known, c.ceiling, c.problems, c.unit, c.source) == (True, None, [], "rps", "configured")


def test_the_evidence_of_a_learned_capacity_with_every_signal() -> None:
    c = region_capacity(
        sig(
            ready=3,
            desired=4,
            running=10,
            waiting=2,
            max_num_seqs=8,
            ttft_p99_ms=150.0,
            replicas_read=3,
            problems=["replica c: slow"],
        ),
        LEARNED,
    )
    assert c.evidence == {
        "ready_replicas": 3,
        "desired_replicas": 4,
        "running": 10.0,
        "waiting": 2.0,
        "target_utilisation": 0.8,
        "window_s": 5.0,
        "max_num_seqs": 8,
        "ttft_p99_ms": 150.0,
        "replicas_read": 3,
        "running_per_replica": 3.333,
        "slot_ceiling": 8.0,
        "ceiling": "max_num_seqs",
        "per_replica": 8.0,
        "capacity": 24.0,
        "usable": 19.2,
        "load": 12.0,
        "headroom": 7.2,
    }
    assert (c.ready_replicas, c.desired_replicas, c.ttft_p99_ms) == (3, 4, 150.0)
    assert (c.source, c.unit, c.ceiling, c.known) == ("learned", "concurrency", 8.0, True)
    assert c.problems == ["replica c: slow"]
    assert c.headroom == pytest.approx(24 * 0.8 - 12)


def test_evidence_rounds_the_slot_ceiling_and_per_replica_to_three_places() -> None:
    c = region_capacity(sig(ready=2, running=5, waiting=1, running_while_waiting=2.34567), LEARNED)
    assert c.evidence["slot_ceiling"] == 2.346 and c.evidence["per_replica"] == 2.346
    assert c.evidence["capacity"] == 4.691 and c.evidence["usable"] == 3.753
    assert c.per_replica == 2.34567 and c.ceiling == 2.34567


def test_no_replica_read_leaves_a_learned_capacity_unknown_but_keeps_the_known_ceiling() -> None:
    c = region_capacity(sig(ready=2, running=0, replicas_read=0), LEARNED, known_ceiling=5.0)
    assert not c.known and c.ceiling == 5.0 and c.per_replica == 0.0
    assert c.problems == [
        "no /metrics read from the 2 ready replicas: load unknown",
        "capacity not learned yet: no max_num_seqs from the servers and no queue to show a ceiling",
    ]
    assert c.evidence["per_replica"] == "unknown" and "running_per_replica" not in c.evidence
    assert (c.capacity, c.usable, c.load, c.headroom) == (0.0, 0.0, 0.0, 0.0)


def test_a_learned_capacity_without_a_ceiling_says_unknown_in_the_evidence() -> None:
    c = region_capacity(sig(ready=2, running=3), LEARNED)
    assert c.problems == [
        "capacity not learned yet: no max_num_seqs from the servers and no queue to show a ceiling"
    ]
    assert c.evidence["per_replica"] == "unknown" and c.evidence["running_per_replica"] == 1.5
    assert "slot_ceiling" not in c.evidence and "ceiling" not in c.evidence
    # The load is still read and reported, but no headroom is claimed.
    assert (c.load, c.headroom, c.capacity, c.per_replica) == (3.0, 0.0, 0.0, 0.0)
    assert c.evidence["load"] == 3.0 and c.evidence["headroom"] == 0.0


def test_no_ready_replica_has_no_capacity_even_with_a_known_ceiling() -> None:
    c = region_capacity(sig(ready=0, desired=3), LEARNED)
    assert c.known and c.per_replica == 0.0 and c.evidence["per_replica"] == 0.0
    assert c.problems == [] and c.headroom == 0.0
    # The known ceiling passes through for later readings; the waiting requests are load over nothing.
    c = region_capacity(sig(ready=0, desired=3, waiting=2), LEARNED, known_ceiling=4.0)
    assert c.known and c.per_replica == 0.0 and c.capacity == 0.0 and c.ceiling == 4.0
    assert c.load == 2.0 and c.headroom == -2.0


def test_a_ceiling_equal_to_the_known_one_is_credited_to_this_reading() -> None:
    c = region_capacity(sig(ready=2, running=4, max_num_seqs=8), LEARNED, known_ceiling=8.0)
    assert c.evidence["ceiling"] == "max_num_seqs"
    # A ceiling under one slot is still this reading's when nothing was known before.
    c = region_capacity(sig(ready=2, running=1, waiting=1, running_while_waiting=0.5), LEARNED)
    assert c.evidence["ceiling"] == "running while requests wait" and c.per_replica == 0.5
    # A higher known ceiling is what counts, and says so.
    c = region_capacity(sig(ready=2, running=4, max_num_seqs=8), LEARNED, known_ceiling=9.0)
    assert c.evidence["ceiling"] == "learned earlier or elsewhere" and c.per_replica == 9.0


# --- the latency bound ------------------------------------------------------------------------------


def test_ttft_at_the_objective_does_not_cap_the_capacity() -> None:
    c = region_capacity(sig(ready=2, running=6, max_num_seqs=8, ttft_p99_ms=200.0), LEARNED)
    assert c.per_replica == 8.0 and "latency_bound_per_replica" not in c.evidence


def test_ttft_over_the_objective_with_nothing_running_does_not_cap_the_capacity() -> None:
    c = region_capacity(sig(ready=2, running=0, waiting=0, max_num_seqs=8, ttft_p99_ms=900.0), LEARNED)
    assert c.per_replica == 8.0 and "latency_bound_per_replica" not in c.evidence


def test_ttft_over_the_objective_caps_even_under_one_request_a_replica() -> None:
    # 1 running over 2 replicas (0.5 each) with TTFT twice the objective: 0.25 a replica meets it.
    c = region_capacity(sig(ready=2, running=1, max_num_seqs=8, ttft_p99_ms=400.0), LEARNED)
    assert c.per_replica == 0.25 and c.evidence["latency_bound_per_replica"] == 0.25 and c.ceiling == 8.0


def test_without_an_objective_ttft_never_caps_the_capacity() -> None:
    spec = CapacitySpec(target_utilisation=0.8)
    c = region_capacity(sig(ready=2, running=6, max_num_seqs=8, ttft_p99_ms=900.0), spec)
    assert c.per_replica == 8.0 and "latency_bound_per_replica" not in c.evidence


def test_the_latency_bound_only_ever_lowers_the_slot_ceiling() -> None:
    # 3 running a replica, TTFT 10 % over: 2.727 a replica would meet it, but the slots allow 2.
    c = region_capacity(sig(ready=2, running=6, max_num_seqs=2, ttft_p99_ms=220.0), LEARNED)
    assert c.per_replica == 2.0 and c.ceiling == 2.0
    assert c.evidence["latency_bound_per_replica"] == 2.727


def test_the_latency_bound_stands_alone_without_a_slot_ceiling() -> None:
    c = region_capacity(sig(ready=2, running=6, ttft_p99_ms=700.0), LEARNED)
    # 3 running a replica x 200 / 700.
    assert c.per_replica == pytest.approx(3 * 200 / 700) and c.ceiling is None and c.known
    assert c.evidence["latency_bound_per_replica"] == 0.857 and c.evidence["per_replica"] == 0.857
    assert c.problems == []


# --- the load ---------------------------------------------------------------------------------------


def test_every_replica_read_is_not_a_scaled_load() -> None:
    c = region_capacity(
        sig(ready=3, running=4, waiting=2, replicas_read=3), CapacitySpec(max_concurrency_per_replica=4)
    )
    assert c.load == 6.0 and "load_scaled_from" not in c.evidence


def test_a_scaled_load_is_the_read_load_times_ready_over_read() -> None:
    c = region_capacity(
        sig(ready=4, running=2, waiting=1, replicas_read=1), CapacitySpec(max_concurrency_per_replica=4)
    )
    assert c.load == 12.0 and c.evidence["load_scaled_from"] == "1 of 4 ready replicas"
    assert c.headroom == pytest.approx(16 * 0.8 - 12)


def test_one_ready_replica_not_read_is_an_unknown_load() -> None:
    c = region_capacity(sig(ready=1, running=0, replicas_read=0), CapacitySpec(max_concurrency_per_replica=4))
    assert not c.known and c.problems == ["no /metrics read from the 1 ready replicas: load unknown"]


def test_no_metrics_read_names_the_ready_replicas() -> None:
    c = region_capacity(sig(ready=5, running=9, replicas_read=0), CapacitySpec(max_concurrency_per_replica=4))
    assert c.problems == ["no /metrics read from the 5 ready replicas: load unknown"]
    assert not c.known and c.load == 0.0 and c.capacity == 20.0


# --- fleet_capacities --------------------------------------------------------------------------------


def test_a_fleet_where_no_region_shows_a_ceiling_stays_unknown() -> None:
    caps = fleet_capacities({"a": sig("a", running=2), "b": sig("b", running=1)}, LEARNED)
    assert [(r, c.known, c.ceiling) for r, c in caps.items()] == [("a", False, None), ("b", False, None)]
    # A remembered ceiling stands in for its own region only.
    caps = fleet_capacities({"a": sig("a", running=2), "b": sig("b", running=1)}, LEARNED, {"a": 3.0})
    assert (caps["a"].known, caps["a"].capacity, caps["b"].known) == (True, 6.0, False)


def test_the_highest_ceiling_seen_anywhere_is_shared() -> None:
    signals = {
        "a": sig("a", running=2, max_num_seqs=4),
        "b": sig("b", running=2, max_num_seqs=6),
        "c": sig("c", running=1),
    }
    caps = fleet_capacities(signals, LEARNED)
    assert {r: c.per_replica for r, c in caps.items()} == {"a": 6.0, "b": 6.0, "c": 6.0}


# --- breaches ---------------------------------------------------------------------------------------


def test_a_capacity_breach_needs_a_known_negative_headroom() -> None:
    assert breaches(cap(headroom=0.0), SLO) == {}
    assert breaches(cap(headroom=-0.5, load=8.5), SLO) == {
        "capacity": "us-west-1 load 8.5 > usable 8 concurrency"
    }
    assert breaches(cap(headroom=-0.5, known=False), SLO) == {}


def test_ttft_and_error_breaches_are_strictly_over_the_objective() -> None:
    assert breaches(cap(ttft_p99_ms=200.0, error_rate=0.01, requests=100), SLO) == {}
    assert breaches(cap(ttft_p99_ms=200.4, error_rate=0.0104, requests=100), SLO) == {
        "ttft": "us-west-1 TTFT p99 200 ms > objective 200 ms",
        "errors": "us-west-1 error rate 1.0% > objective 1.0%",
    }


def test_an_error_rate_counts_from_min_requests_on_and_when_the_count_is_unknown() -> None:
    assert breaches(cap(error_rate=1.0, requests=1.0), SLO) == {
        "errors": "us-west-1 error rate 100.0% > objective 1.0%"
    }
    assert "errors" not in breaches(cap(error_rate=1.0, requests=0.0), SLO)
    assert "errors" in breaches(cap(error_rate=0.5, requests=20.0), SLO, min_requests=20)
    assert "errors" not in breaches(cap(error_rate=0.5, requests=19.0), SLO, min_requests=20)
    assert "errors" in breaches(cap(error_rate=0.5), SLO, min_requests=20)


# --- BreachState ------------------------------------------------------------------------------------


def test_observe_keeps_the_start_of_a_continuing_breach_and_drops_a_cleared_one() -> None:
    t1 = T0 + timedelta(seconds=3)
    s = BreachState().observe("a", {"ttft": "slow", "errors": "5xx"}, T0).observe("b", {"ttft": "b slow"}, T0)
    s = s.observe("a", {"ttft": "slower", "capacity": "short"}, t1)
    assert s.since == {"a": {"ttft": T0, "capacity": t1}, "b": {"ttft": T0}}
    assert s.reasons == {"a": {"ttft": "slower", "capacity": "short"}, "b": {"ttft": "b slow"}}


def test_restart_moves_every_kind_of_one_region_to_now() -> None:
    t1 = T0 + timedelta(seconds=3)
    s = (
        BreachState()
        .observe("a", {"ttft": "slow", "capacity": "short"}, T0)
        .observe("b", {"errors": "e"}, T0)
    )
    r = s.restart("a", t1)
    assert r.since == {"a": {"ttft": t1, "capacity": t1}, "b": {"errors": T0}}
    assert r.reasons == s.reasons
    assert BreachState().restart("c", t1).since == {"c": {}}


def test_sustained_lists_slo_reasons_sorted_by_kind_and_capacity_apart() -> None:
    s = BreachState().observe("a", {"ttft": "slow", "errors": "5xx", "capacity": "short"}, T0)
    s = s.observe("b", {"capacity": "b short"}, T0)
    held = s.sustained(2, T0 + timedelta(seconds=2))
    assert held.breaching == {"a": ["5xx", "slow"]}
    assert held.shortfall == {"a", "b"}
    early = s.sustained(2, T0 + timedelta(seconds=1.5))
    assert early.breaching == {} and early.shortfall == set()


# --- RebalancePlan.moves ------------------------------------------------------------------------------


def test_moves_are_the_weight_changes_of_the_regions_that_changed() -> None:
    plan = RebalancePlan(
        action="shed",
        weights_before={"a": 50, "b": 30, "c": 20},
        weights_after={"a": 40, "b": 30, "c": 30},
        moved_pct=10,
    )
    assert plan.moves == {"a": -10, "c": 10}
    # A region missing after the move has lost all of its weight.
    gone = plan.model_copy(update={"weights_after": {"a": 70, "b": 30}})
    assert gone.moves == {"a": 20, "c": -20}


# --- plan_rebalance: its own reasons ---------------------------------------------------------------------

LIMITS = RebalanceLimits(min_step_pct=5, max_shift_pct=50, hysteresis_pct=10, target_utilisation=0.8)


def conc(region: str, load: float, **kw: object) -> RegionCapacity:
    """Two replicas of 4 concurrent requests each (6.4 usable) carrying `load`."""
    running = min(load, 8)
    return region_capacity(
        sig(region, ready=2, running=running, waiting=load - running, **kw),
        CapacitySpec(max_concurrency_per_replica=4, target_utilisation=0.8),
    )


def test_a_fleet_without_weight_has_nothing_to_rebalance() -> None:
    caps = {"a": conc("a", 0), "b": conc("b", 0)}
    p = plan_rebalance({"a": 0, "b": 0}, {"a": 50, "b": 50}, caps, {}, {"a", "b"}, LIMITS, {})
    assert (p.action, p.weights_after, p.moved_pct) == ("hold", {"a": 0, "b": 0}, 0)
    assert p.reasons == ["no region has weight: nothing to rebalance (the failover owns this)"]
    # One point of weight is something to hold.
    p = plan_rebalance({"a": 1, "b": 0}, {"a": 1, "b": 0}, caps, {}, {"a", "b"}, LIMITS, {})
    assert p.reasons == ["every region within its capacity and the objective"]


def test_an_excess_under_the_minimum_step_holds_with_its_reason_only() -> None:
    caps = {"a": conc("a", 6.5), "b": conc("b", 1)}
    p = plan_rebalance({"a": 50, "b": 50}, {"a": 50, "b": 50}, caps, {}, {"a", "b"}, LIMITS, {})
    assert p.action == "hold"
    assert p.reasons == [
        "a: load 6.5 concurrency > usable 6.4 (2 ready x 4 configured x 0.8): 2% of its share is excess"
    ]
    assert p.held_back == ["a: excess 1% < min_step_pct 5%"]


def test_a_breach_sheds_by_how_far_it_is_over_the_objective() -> None:
    # TTFT 4x the objective: 3/4 of the share; without the objective, one max_shift_pct step (here all).
    caps = {"a": conc("a", 2, ttft_p99_ms=800.0), "b": conc("b", 1)}
    limits = LIMITS.model_copy(update={"max_shift_pct": 100})
    args = ({"a": 50, "b": 50}, {"a": 50, "b": 50}, caps, {"a": ["slow"]}, {"a", "b"}, limits, {})
    p = plan_rebalance(*args, slo=SLO)
    assert p.reasons[0] == "a: slow (sustained): shed 75% of its share"
    assert p.weights_after == {"a": 13, "b": 87}
    p = plan_rebalance(*args)
    assert p.reasons[0] == "a: slow (sustained): shed 100% of its share"
