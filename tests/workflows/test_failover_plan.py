"""The failover plan function (pure): weights after the shift, replicas the target needs, refusals.

The workflow's preflight and `drctl failover --dry-run` both call `plan_failover`, so these cases are
what either would decide from the same reads.
"""

from __future__ import annotations

from drctl.models.failover import capacity_of, plan_failover
from tests.support.config import cap, spec


def test_active_active_60_40_target_keeps_its_replicas_and_takes_the_sources() -> None:
    s = spec([("w", 60, 2), ("e", 40, 2)])
    plan = plan_failover(s, {"w": 60, "e": 40}, "e", None, cap("e", 2), emergency=False, force=False)
    assert plan.weights_after == {"w": 0, "e": 100} and plan.source == "w"
    assert plan.target_replicas_needed == 4 and plan.target_replicas_planned == 4  # 2 own + 2 from w
    assert plan.problems == [] and plan.capacity_ok and plan.shortfall == 0
    assert plan.target_share_after == 1.0 and "2 from w" in plan.sizing


def test_active_passive_100_0_standby_is_sized_from_the_source_not_refused() -> None:
    # The reported bug: a standby at weight 0 was "needs 1000000 replicas" and traffic stayed on the dead region.
    s = spec([("primary", 100, 3), ("standby", 0, 1)])
    for emergency in (False, True):
        plan = plan_failover(
            s,
            {"primary": 100, "standby": 0},
            "standby",
            None,
            cap("standby", 1),
            emergency=emergency,
            force=False,
        )
        assert plan.problems == [], plan.problems
        assert plan.weights_after == {"primary": 0, "standby": 100}
        assert plan.target_replicas_needed == 3 and plan.target_replicas_planned == 3


def test_three_regions_50_30_20_each_target_sized_for_its_own_share() -> None:
    s = spec([("a", 50, 5), ("b", 30, 3), ("c", 20, 2)])
    w = {"a": 50, "b": 30, "c": 20}
    # Only a moves onto c: c carries 70 %, and needs its 2 plus a's 5, not replicas for the whole fleet.
    plan = plan_failover(s, w, "c", "a", cap("c", 2), emergency=True, force=False)
    assert plan.weights_after == {"a": 0, "b": 30, "c": 70}
    assert plan.target_share_after == 0.7 and plan.target_replicas_needed == 7
    # Onto b instead: b carries 80 %, 3 + 5.
    plan = plan_failover(s, w, "b", "a", cap("b", 3), emergency=True, force=False)
    assert plan.weights_after == {"a": 0, "b": 80, "c": 20} and plan.target_replicas_needed == 8
    # Everything onto c (no --from): 2 + 5 + 3.
    plan = plan_failover(s, w, "c", None, cap("c", 2), emergency=False, force=False)
    assert plan.source == "a,b" and plan.target_replicas_needed == 10
    assert plan.problems and "needs 10 replicas" in plan.problems[0] and "max_replicas 8" in plan.problems[0]


def test_target_at_max_replicas_normal_refuses_with_numbers_force_and_emergency_proceed() -> None:
    s = spec([("w", 60, 2), ("e", 40, 2)])
    w = {"w": 60, "e": 40}
    normal = plan_failover(s, w, "e", None, cap("e", 3, max_replicas=3), emergency=False, force=False)
    assert not normal.capacity_ok and len(normal.problems) == 1
    msg = normal.problems[0]
    # 3 already serving its 40 % + 2 for w's 60 %.
    assert "needs 5 replicas" in msg and "max_replicas 3" in msg and "now 3" in msg and "--force" in msg, msg
    forced = plan_failover(s, w, "e", None, cap("e", 3, max_replicas=3), emergency=False, force=True)
    assert forced.problems == [] and forced.target_replicas_planned == 3 and forced.shortfall == 2
    emergency = plan_failover(s, w, "e", None, cap("e", 3, max_replicas=3), emergency=True, force=False)
    assert emergency.problems == [] and emergency.mode == "emergency" and emergency.shortfall == 2


def test_configured_per_replica_capacity_sizes_by_expected_load() -> None:
    s = spec([("primary", 100, 3), ("standby", 0, 1)], max_rps_per_replica=20.0, peak_rps=150.0)
    plan = plan_failover(
        s, {"primary": 100, "standby": 0}, "standby", None, cap("standby", 1), emergency=False, force=False
    )
    assert plan.target_replicas_needed == 8  # ceil(150 × 100 % / 20)
    assert "150 rps" in plan.sizing
    # Never scale down: a target already above the need keeps its replicas.
    s2 = spec([("a", 50, 5), ("b", 50, 5)], max_rps_per_replica=100.0, peak_rps=100.0)
    plan = plan_failover(s2, {"a": 50, "b": 50}, "b", None, cap("b", 5), emergency=False, force=False)
    assert plan.target_replicas_needed == 1 and plan.target_replicas_planned == 5


def test_source_off_its_configured_weight_moves_replicas_in_proportion() -> None:
    # w is at 30 of its configured 60 (a partial earlier shift): half its configured replicas move.
    s = spec([("w", 60, 4), ("e", 40, 2)])
    plan = plan_failover(s, {"w": 30, "e": 70}, "e", None, cap("e", 3), emergency=False, force=False)
    assert plan.target_replicas_needed == 5  # 3 serving in e + 4 × (30 % / 60 %)


def test_hpa_max_is_the_tighter_bound() -> None:
    assert capacity_of("e", "d", 2, 2, 8, 1, 4).max_replicas == 4
    assert capacity_of("e", "d", 2, 2, 8, None, None).max_replicas == 8
