"""The failover plan arithmetic and the monitor's state machine, each rule with exact numbers.

The issue's hand mutation check found these bugs surviving: needed_replicas rounding down,
pick_target preferring the smaller weight, probe_passes judging by the gateway only, observe never
recording `since`. Each has a test here that fails on it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from drctl.models.failover import failback_plan
from drctl.models.failover_plan import (
    _share,
    cap_weights,
    capacity_of,
    needed_replicas,
    plan_failover,
    probe_passes,
    serving_replicas,
    shift_weights,
    target_problem,
)
from drctl.models.health import ProbeStatus, RegionState
from drctl.models.monitor import MonitorInput, MonitorState, RegionTracker, choose_target, pick_target
from tests.support.builders import region_probe
from tests.support.config import cap, spec

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
H, S, U, R = RegionState.HEALTHY, RegionState.SUSPECT, RegionState.UNHEALTHY, RegionState.RECOVERING


def test_shift_weights_moves_the_source_share_onto_the_target() -> None:
    assert shift_weights({"w": 60, "e": 40}, "w", "e") == {"w": 0, "e": 100}
    assert shift_weights({"w": 60}, "w", "e") == {"w": 0, "e": 60}
    assert shift_weights({"e": 40}, "w", "e") == {"w": 0, "e": 40}
    # Nothing to move and nothing serving: the target keeps serving rather than black-holing.
    assert shift_weights({"w": 0, "e": 0}, "w", "e") == {"w": 0, "e": 1}
    assert shift_weights({"w": 1, "e": 0}, "w", "e") == {"w": 0, "e": 1}
    # Over one record's limit, every weight is scaled, not only the largest clipped.
    assert shift_weights({"w": 200, "e": 100, "c": 50}, "w", "e") == {"w": 0, "e": 255, "c": 42}


def test_cap_weights_keeps_shares_and_a_serving_region_serving() -> None:
    assert cap_weights({"a": 255, "b": 10}) == {"a": 255, "b": 10}
    assert cap_weights({"a": 256, "b": 0}) == {"a": 255, "b": 0}
    assert cap_weights({"a": 510, "b": 255, "c": 1, "d": 0}) == {"a": 255, "b": 128, "c": 1, "d": 0}
    assert cap_weights({"a": 300, "b": 150}, max_weight=100) == {"a": 100, "b": 50}
    assert cap_weights({}) == {}
    w = {"a": 10}
    assert cap_weights(w) is not w


def test_share_of_a_region() -> None:
    assert _share({"a": 3, "b": 1}, "a") == 0.75
    assert _share({"a": 3, "b": 1}, "c") == 0.0
    assert _share({"a": 0}, "a") == 0.0
    assert _share({}, "a") == 0.0


def test_serving_replicas_scale_with_the_current_share() -> None:
    s = spec([("w", 60, 6), ("e", 40, 2), ("standby", 0, 3)])
    # w carries 60 % with 6 replicas; at 30 % it needs 3.
    assert serving_replicas(s, "w", {"w": 30, "e": 70}) == pytest.approx(3.0)
    assert serving_replicas(s, "w", {"w": 60, "e": 40}) == pytest.approx(6.0)
    # A standby (configured weight 0) is measured by the fleet's replicas per share: 8 replicas at 100 %.
    assert serving_replicas(s, "standby", {"standby": 50, "e": 50}) == pytest.approx(4.0)
    assert serving_replicas(s, "gone", {"gone": 25, "w": 75}) == pytest.approx(2.0)
    one = spec([("w", 60, 1), ("e", 40, 0)])
    assert serving_replicas(one, "e", {"e": 40, "w": 60}) == pytest.approx(0.4)
    assert serving_replicas(one, "w", {"w": 60, "e": 40}) == pytest.approx(1.0)


def test_needed_replicas_round_up_never_down() -> None:
    s = spec([("w", 60, 3), ("e", 40, 2)])
    # 2 own + 3 from w = 5.
    assert needed_replicas(s, {"w": 60, "e": 40}, {"w": 0, "e": 100}, "e", 2) == (
        5,
        "2 serving in e + 3 from w, for 100% of traffic",
    )
    # Half of w moves: 1.5 replicas, rounded up to 2 (down would under-provision the target).
    assert needed_replicas(s, {"w": 60, "e": 40}, {"w": 30, "e": 70}, "e", 2) == (
        4,
        "2 serving in e + 1.5 from w, for 70% of traffic",
    )
    # A target at weight 0 owns nothing yet; regions that gain weight are not sources.
    # (w's 3 replicas carry its configured 60 %; now it carries all of it, so 5 move.)
    assert needed_replicas(s, {"w": 60, "e": 0}, {"w": 0, "e": 60}, "e", 5)[0] == 5
    assert needed_replicas(s, {"w": 60, "e": 40, "x": 0}, {"w": 60, "e": 0, "x": 40}, "w", 3)[1] == (
        "3 serving in w + 2 from e, for 60% of traffic"
    )
    # Carrying nothing needs nothing; carrying anything needs one.
    assert needed_replicas(s, {"w": 60, "e": 0}, {"w": 60, "e": 0}, "e", 0)[0] == 0
    tiny = spec([("w", 60, 0), ("e", 40, 0)])
    assert needed_replicas(tiny, {"w": 60, "e": 40}, {"w": 0, "e": 100}, "e", 0)[0] == 1


def test_needed_replicas_by_rate_when_the_workload_says_its_rate() -> None:
    s = spec([("w", 60, 3), ("e", 40, 2)], peak_rps=100, max_rps_per_replica=30)
    assert needed_replicas(s, {"w": 60, "e": 40}, {"w": 0, "e": 100}, "e", 2) == (
        4,
        "100% of 100 rps at 30 rps per replica",
    )
    assert needed_replicas(s, {"w": 60, "e": 40}, {"w": 40, "e": 60}, "e", 2) == (
        2,
        "60% of 100 rps at 30 rps per replica",
    )
    exact = spec([("w", 50, 1), ("e", 50, 1)], peak_rps=90, max_rps_per_replica=30)
    assert needed_replicas(exact, {"w": 50, "e": 50}, {"w": 0, "e": 100}, "e", 1)[0] == 3
    # Only one of the two set: sized from replicas, not rates.
    half = spec([("w", 60, 3), ("e", 40, 2)], peak_rps=100)
    assert needed_replicas(half, {"w": 60, "e": 40}, {"w": 0, "e": 100}, "e", 2)[0] == 5


def test_plan_refuses_a_target_without_capacity_unless_forced_or_emergency() -> None:
    s = spec([("w", 60, 6), ("e", 40, 2)])
    plan = plan_failover(s, {"w": 60, "e": 40}, "e", None, cap("e", 2, 5), emergency=False, force=False)
    assert plan.target_replicas_needed == 8 and plan.target_replicas_planned == 5 and plan.shortfall == 3
    assert not plan.capacity_ok and plan.mode == "normal" and plan.target_share_after == 1.0
    assert plan.problems == [
        "target e cannot carry its 100% share after the shift: needs 8 replicas (2 serving in e + 6 from w, for 100% "
        "of traffic), max_replicas 5, now 2 (use --force to shift anyway, or --emergency)"
    ]
    emergency = plan_failover(s, {"w": 60, "e": 40}, "e", None, cap("e", 2, 5), emergency=True, force=False)
    assert emergency.problems == [] and emergency.mode == "emergency" and emergency.shortfall == 3
    forced = plan_failover(s, {"w": 60, "e": 40}, "e", None, cap("e", 2, 5), emergency=False, force=True)
    assert forced.problems == [] and forced.mode == "normal"
    exact = plan_failover(s, {"w": 60, "e": 40}, "e", None, cap("e", 2, 8), emergency=False, force=False)
    assert exact.capacity_ok and exact.problems == [] and exact.shortfall == 0
    # Never scales a target down.
    big = plan_failover(s, {"w": 60, "e": 0}, "e", None, cap("e", 10, 12), emergency=False, force=False)
    assert big.target_replicas_needed == 10 and big.target_replicas_planned == 10


def test_plan_sources_and_refusals() -> None:
    s = spec([("w", 50, 2), ("c", 30, 2), ("e", 20, 2), ("z", 0, 2)])
    every = plan_failover(
        s, {"w": 50, "c": 30, "e": 20, "z": 0}, "e", None, cap("e", 2), emergency=False, force=False
    )
    assert every.source == "w,c" and every.weights_after == {"w": 0, "c": 0, "e": 100, "z": 0}
    assert every.weights_before == {"w": 50, "c": 30, "e": 20, "z": 0}
    one = plan_failover(s, {"w": 50, "c": 30, "e": 20}, "e", "w", cap("e", 2), emergency=False, force=False)
    assert (
        one.source == "w"
        and one.weights_after == {"w": 0, "c": 30, "e": 70}
        and one.target_share_after == 0.7
    )
    for emergency in (False, True):  # a dead target is refused in an emergency too
        issue = target_problem(region_probe(ProbeStatus.DOWN), emergency, True)
        same = plan_failover(
            s, {"w": 50, "e": 50}, "e", "e", cap("e", 2), emergency=emergency, force=False, target_issue=issue
        )
        assert same.problems == [
            "source and target are the same region",
            "target e is DOWN: why (use --force to override)",
        ]
    alone = plan_failover(s, {"e": 100, "w": 0}, "e", None, cap("e", 2), emergency=False, force=False)
    assert alone.source is None and alone.target_replicas_before == 2 and alone.max_replicas == 8
    thirds = plan_failover(s, {"w": 1, "c": 1, "e": 1}, "e", "w", cap("e", 2), emergency=False, force=False)
    assert thirds.target_share_after == 0.6667


def test_capacity_takes_the_tighter_bound() -> None:
    c = capacity_of("e", "llm-stable", 2, 1, 8, 1, 5)
    assert c.model_dump() == {
        "region": "e",
        "deployment": "llm-stable",
        "replicas": 2,
        "ready_replicas": 1,
        "max_replicas": 5,
        "hpa_min_replicas": 1,
        "hpa_max_replicas": 5,
    }
    assert capacity_of("e", "d", 2, 2, 8, None, None).max_replicas == 8
    assert capacity_of("e", "d", 2, 2, 8, 1, 20).max_replicas == 8


def test_probe_passes_judges_the_region_and_its_gateway() -> None:
    assert probe_passes(region_probe(ProbeStatus.HEALTHY), fail_on_degraded=True)
    assert not probe_passes(region_probe(ProbeStatus.DOWN), fail_on_degraded=False)
    assert not probe_passes(region_probe(ProbeStatus.AUTH), fail_on_degraded=False)
    # A healthy gateway does not make a DOWN region pass.
    assert not probe_passes(region_probe(ProbeStatus.DOWN, ProbeStatus.HEALTHY), fail_on_degraded=True)
    # Degraded replicas behind a gateway that serves well: lost capacity, not an outage.
    assert probe_passes(region_probe(ProbeStatus.DEGRADED, ProbeStatus.HEALTHY), fail_on_degraded=True)
    assert not probe_passes(region_probe(ProbeStatus.DEGRADED, ProbeStatus.DEGRADED), fail_on_degraded=True)
    assert probe_passes(region_probe(ProbeStatus.DEGRADED, ProbeStatus.DEGRADED), fail_on_degraded=False)


def test_target_problem_refuses_a_dead_target_even_in_an_emergency() -> None:
    assert target_problem(None, emergency=False, fail_on_degraded=True) is None
    assert target_problem(region_probe(ProbeStatus.DOWN), emergency=True, fail_on_degraded=False) == (
        "target e is DOWN: why (use --force to override)"
    )
    slow = region_probe(ProbeStatus.DEGRADED, ProbeStatus.DEGRADED)
    assert target_problem(slow, emergency=False, fail_on_degraded=True) == (
        "target e is DEGRADED: why (use --force to override)"
    )
    assert target_problem(slow, emergency=True, fail_on_degraded=True) is None
    assert target_problem(region_probe(ProbeStatus.HEALTHY), emergency=False, fail_on_degraded=True) is None


def test_failback_plan_steps_linearly_and_ends_exactly_configured() -> None:
    assert failback_plan({"w": 0, "e": 100}, {"w": 60, "e": 40}, 3) == [
        {"w": 20, "e": 80},
        {"w": 40, "e": 60},
        {"w": 60, "e": 40},
    ]
    assert failback_plan({"e": 100}, {"w": 60, "e": 40}, 2) == [{"w": 30, "e": 70}, {"w": 60, "e": 40}]
    assert failback_plan({"w": 60, "e": 40}, {"w": 60, "e": 40}, 3) == [{"w": 60, "e": 40}]
    # An all-zero step is skipped; repeated steps collapse.
    assert failback_plan({"w": 0, "e": 0}, {"w": 1, "e": 0}, 4) == [{"w": 1, "e": 0}]
    assert failback_plan({"w": 0, "e": 1}, {"w": 1, "e": 0}, 1) == [{"w": 1, "e": 0}]
    assert failback_plan({"w": 0, "e": 10}, {"w": 10, "e": 0}, 0) == [{"w": 10, "e": 0}]


def _feed(t: RegionTracker, results: str, start: datetime = T0, ft: int = 3, rt: int = 2) -> list[bool]:
    return [t.observe(c == "+", start + timedelta(seconds=i), ft, rt) for i, c in enumerate(results)]


def test_observe_walks_the_state_machine_and_records_since() -> None:
    t = RegionTracker(region="w")
    assert _feed(t, "-") == [True]
    assert (t.state, t.since, t.first_failure_at, t.consecutive_failures) == (S, T0, T0, 1)
    # One blip, never confirmed: straight back to healthy.
    assert t.observe(True, T0 + timedelta(seconds=5), 3, 2) is True
    assert (t.state, t.since, t.first_failure_at, t.last_good_at) == (
        H,
        T0 + timedelta(seconds=5),
        None,
        T0 + timedelta(seconds=5),
    )
    t = RegionTracker(region="w")
    changes = _feed(t, "---")
    assert changes == [True, False, True] and t.state is U and t.since == T0 + timedelta(seconds=2)
    assert t.first_failure_at == T0 and t.consecutive_failures == 3 and t.consecutive_successes == 0
    assert t.observe(False, T0 + timedelta(seconds=9), 3, 2) is False and t.since == T0 + timedelta(seconds=2)
    # Recovery needs recovery_threshold successes in a row; a relapse starts it over.
    assert t.observe(True, T0 + timedelta(seconds=10), 3, 2) is True and t.state is R
    assert (
        t.since == T0 + timedelta(seconds=10) and t.consecutive_failures == 0 and t.consecutive_successes == 1
    )
    assert t.observe(False, T0 + timedelta(seconds=11), 3, 2) is True and t.state is U
    assert t.observe(True, T0 + timedelta(seconds=12), 3, 2) is True and t.state is R
    assert t.observe(True, T0 + timedelta(seconds=13), 3, 2) is True and t.state is H
    assert t.first_failure_at is None and t.since == T0 + timedelta(seconds=13)
    assert t.observe(True, T0 + timedelta(seconds=14), 3, 2) is False and t.consecutive_successes == 3


def test_observe_with_thresholds_of_one() -> None:
    t = RegionTracker(region="w")
    assert t.observe(False, T0, 1, 1) is True and t.state is U
    assert t.observe(True, T0, 1, 1) is True and t.state is H and t.first_failure_at is None


def test_record_probe_keeps_the_last_probe() -> None:
    t = RegionTracker(region="e")
    t.record_probe(region_probe(ProbeStatus.DEGRADED, failing_fraction=0.5, ttft_p50_ms=12.0), T0)
    assert (t.last_status, t.last_reason, t.last_ttft_ms, t.last_failing_fraction, t.last_probed_at) == (
        ProbeStatus.DEGRADED,
        "why",
        12.0,
        0.5,
        T0,
    )


def _trackers(**states: RegionState) -> dict[str, RegionTracker]:
    return {name: RegionTracker(region=name, state=state) for name, state in states.items()}


def test_pick_target_prefers_healthy_then_the_larger_weight() -> None:
    weights = {"w": 50, "small": 10, "big": 40}
    assert pick_target(_trackers(w=U, small=H, big=H), "w", weights) == "big"
    assert pick_target(_trackers(w=U, small=H, big=R), "w", weights) == "small"
    assert pick_target(_trackers(w=U, small=R, big=R), "w", weights) == "big"
    assert pick_target(_trackers(w=U, small=S, big=U), "w", weights) is None
    assert pick_target(_trackers(w=U, small=H, big=H), "w", weights, exclude={"big"}) == "small"
    assert pick_target(_trackers(w=H), "w", weights) is None
    # Equal weights: by name, so the choice is deterministic; an unconfigured region weighs 0.
    assert pick_target(_trackers(w=U, b=H, a=H), "w", {"a": 5, "b": 5}) == "a"
    assert pick_target(_trackers(w=U, b=H, a=H), "w", {"b": 1}) == "b"


def test_choose_target_avoids_a_target_that_just_failed_until_it_expires() -> None:
    s = spec([("w", 50, 2), ("big", 30, 2), ("small", 20, 2)])
    state = MonitorState.initial(MonitorInput(spec=s, max_iterations=7))
    assert (
        state.max_iterations == 7
        and state.policy == "automatic"
        and list(state.trackers) == ["w", "big", "small"]
    )
    assert all(t.region == name and t.state is H for name, t in state.trackers.items())
    state.avoid_targets = {"big": T0 + timedelta(seconds=60)}
    assert choose_target(state, "w", T0) == "small"
    # Expired at exactly `until`: the avoidance is dropped.
    assert choose_target(state, "w", T0 + timedelta(seconds=60)) == "big" and state.avoid_targets == {}
    # When only the failed target is left it is tried again; unresolved regions never.
    state.avoid_targets = {"big": T0 + timedelta(seconds=60)}
    state.unresolved = {"small": "no such region in the worker's config"}
    assert choose_target(state, "w", T0) == "big"
    state.unresolved = {"small": "x", "big": "y"}
    assert choose_target(state, "w", T0) is None
