"""The rebalancing rule's arithmetic, piece by piece, at its edges (drctl.models.rebalance_rule).

test_rebalance_rule.py drives the rule as a whole through plan_rebalance; these call each step with
hand-made capacities so every figure and every line of text the rule writes can be checked exactly.
"""

from __future__ import annotations

import pytest

from drctl.config.capacity import RebalanceLimits, SloConfig
from drctl.models import rebalance_rule as rr
from drctl.models.capacity import RebalancePlan, RegionCapacity
from drctl.models.rebalance_rule import Rule

LIMITS = RebalanceLimits(min_step_pct=5, max_shift_pct=50, hysteresis_pct=10, target_utilisation=0.8)
SLO = SloConfig(ttft_p99_ms=200, error_rate=0.01)


def rc(
    region: str,
    usable: float,
    load: float,
    *,
    known: bool = True,
    per_replica: float = 4.0,
    ready: int = 1,
    desired: int | None = None,
    ttft: float | None = None,
    err: float | None = None,
    problems: tuple[str, ...] = (),
) -> RegionCapacity:
    """A region's capacity as region_capacity reports it, every figure given."""
    return RegionCapacity(
        region=region,
        capacity=usable / 0.8,
        load=load,
        usable=usable,
        headroom=usable - load if known else 0.0,
        unit="concurrency",
        per_replica=per_replica,
        source="configured",
        known=known,
        ready_replicas=ready,
        desired_replicas=ready if desired is None else desired,
        ttft_p99_ms=ttft,
        error_rate=err,
        problems=list(problems),
    )


def rule(
    weights: dict[str, int],
    caps: dict[str, RegionCapacity],
    *,
    configured: dict[str, int] | None = None,
    healthy: set[str] | None = None,
    limits: RebalanceLimits = LIMITS,
    slo: SloConfig | None = None,
) -> Rule:
    return Rule(
        weights,
        dict(weights) if configured is None else configured,
        caps,
        set(weights) if healthy is None else healthy,
        limits,
        slo,
    )


def blank(weights: dict[str, int]) -> RebalancePlan:
    return RebalancePlan(
        action="hold", weights_before=dict(weights), weights_after=dict(weights), moved_pct=0
    )


# --- small figures -----------------------------------------------------------------------------


def test_pct_is_the_share_of_the_total_in_whole_percent() -> None:
    assert rr._pct(1, 3) == "33%"
    assert rr._pct(30, 60) == "50%"
    assert rr._pct(2, 3) == "67%"
    assert rr._pct(150, 100) == "150%"


def test_breach_fraction_is_how_far_the_signal_is_over_the_objective() -> None:
    # TTFT 4x the objective sheds 3/4, an error rate 10x over sheds 9/10: the larger of the two.
    assert rr._breach_fraction(rc("a", 8, 2, ttft=800), SLO, LIMITS) == pytest.approx(0.75)
    assert rr._breach_fraction(rc("a", 8, 2, err=0.1), SLO, LIMITS) == pytest.approx(0.9)
    assert rr._breach_fraction(rc("a", 8, 2, ttft=800, err=0.1), SLO, LIMITS) == pytest.approx(0.9)
    assert rr._breach_fraction(rc("a", 8, 2, ttft=1000, err=0.02), SLO, LIMITS) == pytest.approx(0.8)
    # No figure over the objective (equal is not over), or no objective: one max_shift_pct step.
    assert rr._breach_fraction(rc("a", 8, 2, ttft=200, err=0.01), SLO, LIMITS) == 0.5
    assert rr._breach_fraction(rc("a", 8, 2), SLO, LIMITS) == 0.5
    assert rr._breach_fraction(rc("a", 8, 2, ttft=800, err=0.1), None, LIMITS) == 0.5
    assert rr._breach_fraction(rc("a", 8, 2, ttft=0.0, err=0.0), SLO, LIMITS) == 0.5
    quarter = LIMITS.model_copy(update={"max_shift_pct": 25})
    assert rr._breach_fraction(rc("a", 8, 2), None, quarter) == 0.25


# --- Rule: the derived figures -----------------------------------------------------------------


def test_configured_weights_are_put_on_the_current_totals_scale() -> None:
    caps = {"a": rc("a", 8, 2), "b": rc("b", 8, 2), "c": rc("c", 8, 0)}
    # A failover rescaled the total to 100 + 0; configured 3 : 2 of 5.
    r = rule({"a": 60, "b": 40, "c": 0}, caps, configured={"a": 3, "b": 2})
    assert r.total == 100
    assert r.configured == {"a": 60.0, "b": 40.0, "c": 0.0}
    # A configured region the weights do not have is not part of the scale.
    r = rule({"a": 60, "b": 40}, caps, configured={"a": 1, "b": 1, "z": 98})
    assert r.configured == {"a": 50.0, "b": 50.0}
    # Nothing configured: nothing to return to.
    r = rule({"a": 60, "b": 40}, caps, configured={})
    assert r.configured == {"a": 0.0, "b": 0.0}


def test_max_and_min_units_are_the_limits_on_the_totals_scale() -> None:
    caps = {"a": rc("a", 8, 2), "b": rc("b", 8, 2)}
    r = rule({"a": 60, "b": 40}, caps)
    assert (r.max_units, r.min_units) == (50, 5.0)
    r = rule({"a": 42, "b": 28}, caps, limits=LIMITS.model_copy(update={"min_step_pct": 3}))
    assert (r.max_units, r.min_units) == (35, pytest.approx(2.1))
    # Never less than one whole point a step.
    r = rule({"a": 6, "b": 4}, caps, limits=LIMITS.model_copy(update={"max_shift_pct": 7}))
    assert r.max_units == 1


def test_the_fleets_level_counts_only_known_healthy_weighted_regions() -> None:
    caps = {
        "a": rc("a", 4, 6),
        "b": rc("b", 4, 3),
        "c": rc("c", 0, 100, known=False),  # unknown
        "d": rc("d", 1, 50),  # not healthy
        "e": rc("e", 1, 50),  # not in the weights
    }
    weights = {"a": 50, "b": 30, "c": 10, "d": 10}
    r = rule(weights, caps, healthy={"a", "b", "c"})
    assert r.level == pytest.approx(9 / 8)
    # Never below 1, never above 1 / target_utilisation.
    assert rule({"a": 50, "b": 50}, {"a": rc("a", 4, 1), "b": rc("b", 4, 1)}).level == 1.0
    assert rule({"a": 50, "b": 50}, {"a": rc("a", 4, 10), "b": rc("b", 4, 10)}).level == 1.25
    # A fleet with less than one unit of usable capacity is still a fleet: 1 on 0.5 is twice over.
    assert rule({"a": 50, "b": 50}, {"a": rc("a", 0.25, 0.5), "b": rc("b", 0.25, 0.5)}).level == 1.25
    # Nothing usable at all: no level to hold anyone to.
    assert rule({"a": 50, "b": 50}, {"a": rc("a", 0, 3), "b": rc("b", 0, 3)}).level == 1.0


def test_the_reference_load_per_point_is_that_of_the_regions_within_their_capacity() -> None:
    caps = {
        "a": rc("a", 4, 6),  # over its usable capacity: not calm
        "b": rc("b", 2, 2),  # exactly at it: calm
        "c": rc("c", 8, 1),
        "d": rc("d", 8, 5),  # no weight: its load is nobody's points
        "e": rc("e", 8, 0.5),  # one point
        "f": rc("f", 8, 1e-6),  # a gauge's rounding, no load
        "g": rc("g", 0, 3, known=False),
        "h": rc("h", 8, 3),  # not in the weights
    }
    weights = {"a": 60, "b": 40, "c": 10, "d": 0, "e": 1, "f": 5, "g": 20}
    r = rule(weights, caps)
    assert r.ref_load == pytest.approx(3.5 / 51)
    # Each region's own figure where it has one, else the reference.
    assert r.load_per_point("a") == pytest.approx(0.1)
    assert r.load_per_point("e") == 0.5
    assert r.load_per_point("d") == r.ref_load
    assert r.load_per_point("f") == r.ref_load
    assert r.load_per_point("h") == r.ref_load
    # Every region with load over its capacity: they are the reference then.
    over = rule({"a": 60, "b": 40}, {"a": rc("a", 4, 6), "b": rc("b", 1, 8)})
    assert over.ref_load == pytest.approx(14 / 100)
    # No region with load: no reference.
    idle = rule({"a": 60, "b": 40}, {"a": rc("a", 4, 0), "b": rc("b", 4, 0)})
    assert idle.ref_load is None and idle.load_per_point("a") is None


def test_headroom_is_room_below_the_fleets_level() -> None:
    calm = rule({"a": 50, "b": 50}, {"a": rc("a", 4, 6), "b": rc("b", 8, 2)})
    assert (
        calm.level == 1.0 and calm.headroom(calm.caps["b"]) == 6.0 and calm.headroom(calm.caps["a"]) == -2.0
    )
    hot = rule({"a": 50, "b": 50}, {"a": rc("a", 4, 6), "b": rc("b", 4, 3)})
    assert hot.headroom(hot.caps["b"]) == pytest.approx(4 * 9 / 8 - 3)


def test_room_is_the_points_the_headroom_holds_within_one_weighted_record() -> None:
    caps = {"a": rc("a", 4, 6), "b": rc("b", 4, 2), "c": rc("c", 100, 1)}
    r = rule({"a": 40, "b": 40, "c": 20}, caps)
    # b: 2 of headroom at 0.05 a point.
    assert r.room("b") == pytest.approx(40.0)
    # c: 99 of headroom at 0.05 a point is more than the whole total: the total.
    assert r.room("c") == 100.0
    # Route 53 takes at most 255 in one record.
    big = rule({"a": 250, "b": 50}, {"a": rc("a", 1000, 25), "b": rc("b", 1, 5)})
    assert big.room("a") == 5.0
    past = rule({"a": 260, "b": 40}, {"a": rc("a", 1000, 26), "b": rc("b", 1, 5)})
    assert past.room("a") == 0.0
    # A region read but not in the weights yet may be given up to a whole record.
    fresh = rule({"a": 200, "b": 100}, {"a": rc("a", 1000, 20), "b": rc("b", 100, 10), "h": rc("h", 1000, 0)})
    assert fresh.load_per_point("h") == pytest.approx(0.1) and fresh.room("h") == 255.0
    # No figure to convert by: the most a record holds.
    idle = rule({"a": 60, "b": 40}, {"a": rc("a", 4, 0), "b": rc("b", 4, 0)})
    assert idle.room("b") == 100.0


def test_over_objective_is_either_signal_strictly_over() -> None:
    r = rule({"a": 100}, {"a": rc("a", 8, 2)}, slo=SLO)
    assert r.over_objective(rc("a", 8, 2, ttft=201))
    assert r.over_objective(rc("a", 8, 2, err=0.02))
    assert r.over_objective(rc("a", 8, 2, ttft=100, err=0.02))
    assert not r.over_objective(rc("a", 8, 2, ttft=200, err=0.01))
    assert not r.over_objective(rc("a", 8, 2))
    assert not rule({"a": 100}, {"a": rc("a", 8, 2)}).over_objective(rc("a", 8, 2, ttft=900, err=0.5))


# --- excess ------------------------------------------------------------------------------------


def test_excess_of_a_region_short_of_capacity() -> None:
    r = rule({"a": 60, "b": 40}, {"a": rc("a", 4, 6), "b": rc("b", 8, 2)})
    reasons: list[str] = []
    held: list[str] = []
    assert rr.excess(r, {}, None, None, reasons, held) == {"a": pytest.approx(20.0)}
    assert reasons == [
        "a: load 6 concurrency > usable 4 (1 ready x 4 configured x 0.8): 33% of its share is excess"
    ]
    assert held == []
    # Sustained for the window: the same; not yet: held, with the window.
    reasons.clear()
    assert rr.excess(r, {}, {"a"}, None, reasons, held) == {"a": pytest.approx(20.0)}
    assert len(reasons) == 1 and held == []
    reasons.clear()
    assert rr.excess(r, {}, {"b"}, None, reasons, held) == {}
    assert reasons == [] and held == ["a: short of capacity, not yet for 2s"]


def test_excess_when_the_fleet_is_over_its_usable_capacity_names_the_level() -> None:
    r = rule({"a": 60, "b": 40}, {"a": rc("a", 4, 6), "b": rc("b", 4, 3)})
    reasons: list[str] = []
    out = rr.excess(r, {}, None, None, reasons, [])
    # Held to 9/8 of its usable capacity: 1 - 4.5 / 6 = 25 % of 60.
    assert out == {"a": pytest.approx(15.0)}
    assert reasons == [
        "a: load 6 concurrency > usable 4 (1 ready x 4 configured x 0.8); the fleet carries 1.12 x its "
        "usable capacity, each region as much of its own: 25% of its share is excess"
    ]


def test_excess_skips_what_it_may_not_move() -> None:
    caps = {
        "a": rc("a", 0, 5, known=False),  # unknown
        "b": rc("b", 1, 5),  # not healthy
        "c": rc("c", 1, 5),  # no weight
        "d": rc("d", 4, 4),  # exactly at its capacity
        "f": rc("f", 100, 1),
    }
    weights = {"a": 20, "b": 20, "c": 0, "d": 20, "e": 20, "f": 20}  # e: no capacity read
    r = rule(weights, caps, healthy={"a", "c", "d", "e", "f"})
    reasons: list[str] = []
    held: list[str] = []
    assert rr.excess(r, {}, None, None, reasons, held) == {}
    assert reasons == [] and held == []


def test_excess_of_a_small_load_over_a_smaller_capacity() -> None:
    r = rule({"a": 60, "b": 40}, {"a": rc("a", 0.25, 0.5), "b": rc("b", 8, 2)})
    assert rr.excess(r, {}, None, None, [], []) == {"a": pytest.approx(30.0)}


def test_an_excess_at_the_minimum_step_moves_and_below_it_is_held() -> None:
    limits = LIMITS.model_copy(update={"min_step_pct": 25})
    # 4 on 2 usable: half of 64 points is 32, exactly min_step_pct of 128.
    r = rule({"a": 64, "b": 64}, {"a": rc("a", 2, 4), "b": rc("b", 8, 1)}, limits=limits)
    held: list[str] = []
    assert rr.excess(r, {}, None, None, [], held) == {"a": 32.0} and held == []
    # 4.2 on 4: 1/21 of 60 points is 2.9, under 5.
    r = rule({"a": 60, "b": 40}, {"a": rc("a", 4, 4.2), "b": rc("b", 8, 1)})
    assert rr.excess(r, {}, None, None, [], held) == {}
    assert held == ["a: excess 3% < min_step_pct 5%"]
    # Even less than one point is said.
    held.clear()
    r = rule({"a": 2, "b": 98}, {"a": rc("a", 3, 4), "b": rc("b", 100, 1)})
    assert rr.excess(r, {}, None, None, [], held) == {}
    assert held == ["a: excess 0% < min_step_pct 5%"]


def test_a_breach_sheds_how_far_it_is_over() -> None:
    r = rule({"a": 60, "b": 40}, {"a": rc("a", 8, 2, ttft=800), "b": rc("b", 8, 2)}, slo=SLO)
    reasons: list[str] = []
    out = rr.excess(r, {"a": ["slow", "failing"]}, None, SLO, reasons, [])
    assert out == {"a": pytest.approx(45.0)}
    assert reasons == ["a: slow; failing (sustained): shed 75% of its share"]


def test_a_breach_sheds_at_least_the_minimum_step_and_at_most_the_whole_share() -> None:
    # 4 points: one max step (50 %) would be 2, under the 5-point minimum; the whole 4 then.
    r = rule({"a": 4, "b": 96}, {"a": rc("a", 8, 2), "b": rc("b", 8, 2)})
    reasons: list[str] = []
    assert rr.excess(r, {"a": ["slow"]}, None, None, reasons, []) == {"a": 4.0}
    assert reasons == ["a: slow (sustained): shed 100% of its share"]
    # A single point breaching still sheds it, though it is under the minimum step.
    r = rule({"a": 1, "b": 99}, {"a": rc("a", 8, 2), "b": rc("b", 8, 2)})
    assert rr.excess(r, {"a": ["slow"]}, None, None, [], []) == {"a": 1.0}


def test_short_and_breaching_sheds_the_larger_of_the_two() -> None:
    # 4 on 1 usable: 3/4 short; breaching with no objective to scale by: one 50 % step.
    r = rule({"a": 60, "b": 40}, {"a": rc("a", 1, 4), "b": rc("b", 100, 2)})
    reasons: list[str] = []
    assert rr.excess(r, {"a": ["slow"]}, None, None, reasons, []) == {"a": pytest.approx(45.0)}
    assert reasons[1] == "a: slow (sustained): shed 50% of its share"
    # And the other way round: 1/3 short, breaching 3/4 over.
    r = rule({"a": 60, "b": 40}, {"a": rc("a", 4, 6, ttft=800), "b": rc("b", 100, 2)}, slo=SLO)
    assert rr.excess(r, {"a": ["slow"]}, None, SLO, [], []) == {"a": pytest.approx(45.0)}


# --- targets -----------------------------------------------------------------------------------


def test_targets_say_why_each_region_takes_nothing() -> None:
    caps = {
        "a": rc("a", 4, 6),  # the source
        "b": rc("b", 8, 2),  # not healthy
        "c": rc("c", 0, 0, known=False, problems=("no metrics", "no replicas")),
        "e": rc("e", 8, 2),  # breaching (sustained)
        "f": rc("f", 8, 2, ttft=900),  # over the objective now
        "g": rc("g", 6.4, 6.4),  # no headroom
        "h": rc("h", 8, 2),
        "i": rc("i", 2.5, 2),  # half a unit of headroom: 2.5 points at 0.2
    }
    weights = {"a": 30, "b": 10, "c": 10, "d": 10, "e": 10, "f": 10, "g": 10, "h": 10, "i": 10}  # d: not read
    r = rule(weights, caps, healthy=set(weights) - {"b"}, slo=SLO)
    held: list[str] = []
    out = rr.targets(r, {"a": 10.0}, {"e": ["slow"]}, held)
    assert out == {"h": pytest.approx(30.0), "i": pytest.approx(2.5)}
    assert held == [
        "b: not healthy, takes no share",
        "c: capacity unknown, takes no share (no metrics; no replicas)",
        "d: capacity unknown, takes no share",
        "e: breaches the objective, takes no share",
        "f: breaches the objective, takes no share",
        "g has no headroom (load 6.4 of 6.4 concurrency usable)",
    ]


def test_a_target_at_the_fleets_level_has_no_headroom_and_it_is_said() -> None:
    # 9 on 8 usable: each is held to 9/8 of its own; b is there exactly.
    r = rule({"a": 50, "b": 50}, {"a": rc("a", 4, 4.5), "b": rc("b", 4, 4.5)})
    held: list[str] = []
    assert rr.targets(r, {"a": 10.0}, {}, held) == {}
    assert held == ["b has no headroom (load 4.5 of 4 concurrency usable at the fleet's 1.12 x)"]


# --- prescale ----------------------------------------------------------------------------------


def test_prescale_carries_the_gain_and_a_share_of_what_waits() -> None:
    # b and c each could take 64 more points on their extra replicas: the 32 that wait split evenly.
    caps = {
        "a": rc("a", 1, 10),
        "b": rc("b", 4, 4, per_replica=5),  # 0.125 a point
        "c": rc("c", 4, 2, per_replica=5),  # 0.125 a point
    }
    r = rule({"a": 52, "b": 32, "c": 16}, caps)
    # b: 4 + (16 + 16) x 0.125 = 8, two replicas of 4 usable; c: 2 + 16 x 0.125 = 4, still one.
    assert rr.prescale(r, {"b": 16}, {"b": 40.0, "c": 40.0}, 32.0, {"b": 3, "c": 3}) == {"b": 2}
    # Nothing waits: b carries its gain on two.
    assert rr.prescale(r, {"b": 16}, {"b": 40.0, "c": 40.0}, 0.0, {"b": 3, "c": 3}) == {"b": 2}
    # More than max_replicas would carry: max_replicas.
    assert rr.prescale(r, {"b": 100}, {"b": 40.0}, 0.0, {"b": 3}) == {"b": 3}


def test_prescale_shares_what_waits_by_the_room_the_replicas_would_add() -> None:
    caps = {
        "a": rc("a", 1, 10),
        "b": rc("b", 4, 4, per_replica=5),  # 0.125 a point; 2 more replicas: 64 points
        "c": rc("c", 4, 2, per_replica=5),  # 0.0625 a point; 2 more replicas: 128, capped at 100
    }
    r = rule({"a": 36, "b": 32, "c": 32}, caps)
    # 41 wait: b 41 x 64 / 164 = 16, c 25. b: 4 + 16 x 0.125 = 6: two; c: 2 + 25 x 0.0625 = 3.56: one.
    assert rr.prescale(r, {}, {"b": 0.0, "c": 0.0}, 41.0, {"b": 3, "c": 3}) == {"b": 2}
    # 82 wait: b 32, c 50. b: 4 + 32 x 0.125 = 8: two; c: 2 + 50 x 0.0625 = 5.1: two.
    assert rr.prescale(r, {}, {"b": 0.0, "c": 0.0}, 82.0, {"b": 3, "c": 3}) == {"b": 2, "c": 2}
    # 90 wait: b 35.1 (8.4: three), c 54.9 (5.4: two).
    assert rr.prescale(r, {}, {"b": 0.0, "c": 0.0}, 90.0, {"b": 3, "c": 3}) == {"b": 3, "c": 2}


def test_prescale_a_target_whose_replicas_add_room_for_one_point() -> None:
    # e: 4 a point, one more replica of 4 usable is room for one point, and the one that waits is its.
    caps = {"a": rc("a", 1, 10), "e": rc("e", 4, 4, per_replica=5)}
    r = rule({"a": 99, "e": 1}, caps)
    assert rr.prescale(r, {}, {"e": 0.0}, 1.0, {"e": 2}) == {"e": 2}


def test_prescale_gives_no_waiting_share_to_a_target_already_above_its_max() -> None:
    # f runs 4 replicas with a max of 3 (it is being scaled down): its replicas add no room.
    caps = {
        "a": rc("a", 1, 10),
        "b": rc("b", 4, 4, per_replica=5),  # 0.125 a point, 64 points of room on two more
        "f": rc("f", 16, 4, per_replica=5, ready=4, desired=1),  # 0.25 a point
    }
    r = rule({"a": 52, "b": 32, "f": 16}, caps)
    # f carries its 16-point gain: 4 + 4 = 8, two replicas; what waits all goes to b: 8, two.
    assert rr.prescale(r, {"f": 16}, {"b": 0.0, "f": 0.0}, 32.0, {"b": 3, "f": 3}) == {"b": 2, "f": 2}
    # Alone, f has no room to share out.
    assert rr.prescale(r, {"f": 16}, {"f": 0.0}, 32.0, {"f": 3}) == {"f": 2}


def test_prescale_does_not_count_a_target_already_scaling_to_its_max() -> None:
    caps = {
        "a": rc("a", 1, 10),
        "b": rc("b", 4, 4, per_replica=5),  # 0.125 a point, 64 points of room on two more
        "d": rc("d", 4, 4, per_replica=5, ready=1, desired=3),  # 0.25 a point, already asked for 3 of 3
    }
    r = rule({"a": 52, "b": 32, "d": 16}, caps)
    # All 40 that wait are b's: 4 + 5 = 9, three replicas.
    assert rr.prescale(r, {}, {"b": 0.0, "d": 0.0}, 40.0, {"b": 3, "d": 3}) == {"b": 3}


def test_prescale_with_small_replicas() -> None:
    # One request a replica, 0.8 usable: 0.8 + 10 x 0.1 = 1.8 needs three.
    caps = {"a": rc("a", 1, 10), "b": rc("b", 0.8, 0.8, per_replica=1)}
    r = rule({"a": 92, "b": 8}, caps)
    assert rr.prescale(r, {"b": 10}, {"b": 0.0}, 0.0, {"b": 4}) == {"b": 3}


def test_prescale_only_where_a_target_can_scale() -> None:
    caps = {
        "a": rc("a", 1, 10),
        "b": rc("b", 4, 4, per_replica=5),
        "c": rc("c", 0, 0, per_replica=0, ready=0, desired=0),  # no replica size known
        "d": rc("d", 4, 4, per_replica=5, ready=1, desired=3),  # already scaling to 3
    }
    r = rule({"a": 36, "b": 32, "c": 16, "d": 16}, caps)
    targets = {"b": 0.0, "c": 0.0, "d": 0.0}
    # b at its max_replicas; c with no figure; d already asked for as many as it may have.
    assert rr.prescale(r, {"b": 30, "d": 30}, targets, 10.0, {"b": 1, "c": 9, "d": 3}) == {}
    # b with no max_replicas of its own may not be scaled, nor may a target with no replica yet.
    assert rr.prescale(r, {"b": 30}, {"b": 0.0}, 10.0, {}) == {}
    e = rule({"a": 36, "e": 64}, {"a": rc("a", 1, 10), "e": rc("e", 0, 0, per_replica=5, ready=0, desired=0)})
    assert rr.prescale(e, {"e": 10}, {"e": 0.0}, 0.0, {}) == {}
    # No load to convert points by: nothing to size.
    idle = rule({"a": 50, "b": 50}, {"a": rc("a", 4, 0), "b": rc("b", 4, 0, per_replica=5)})
    assert rr.prescale(idle, {"b": 30}, {"b": 0.0}, 10.0, {"b": 9}) == {}


# --- shed --------------------------------------------------------------------------------------


def test_shed_moves_the_excess_to_the_targets_in_proportion_to_headroom() -> None:
    caps = {"a": rc("a", 1, 6), "b": rc("b", 8, 2), "c": rc("c", 4, 2)}
    r = rule({"a": 60, "b": 20, "c": 20}, caps)
    p = blank(r.weights)
    # b: 6 at 0.1 a point = 60; c: 2 at 0.1 = 20: 30 points split 3 : 1.
    rr.shed(r, {"a": 30.0}, {}, {}, p)
    assert p.action == "shed" and p.moved_pct == 30
    assert p.weights_after == {"a": 30, "b": 43, "c": 27}
    assert p.reasons == ["shed a -30 to b +23, c +7 (in proportion to headroom)"]
    assert p.held_back == [] and p.prescale == {}


def test_shed_takes_from_each_source_in_proportion() -> None:
    caps = {"a": rc("a", 1, 6), "b": rc("b", 1, 6), "c": rc("c", 100, 2)}
    r = rule({"a": 40, "b": 40, "c": 20}, caps)
    p = blank(r.weights)
    rr.shed(r, {"a": 15.0, "b": 5.0}, {}, {}, p)
    assert p.weights_after == {"a": 25, "b": 35, "c": 40} and p.moved_pct == 20
    assert p.reasons == ["shed a -15, b -5 to c +20 (in proportion to headroom)"]
    # A part of a point sheds as a whole point from its source.
    p = blank(r.weights)
    rr.shed(r, {"a": 14.5, "b": 5.5}, {}, {}, p)
    assert p.weights_after == {"a": 25, "b": 35, "c": 40}


def test_shed_caps_the_step_at_max_shift_pct() -> None:
    caps = {"a": rc("a", 1, 6), "b": rc("b", 100, 2)}
    r = rule({"a": 80, "b": 20}, caps)
    p = blank(r.weights)
    rr.shed(r, {"a": 60.0}, {}, {}, p)
    assert p.held_back == ["max_shift_pct 50% caps this step at 50% of the 60% excess"]
    assert p.weights_after == {"a": 30, "b": 70}
    # Exactly max_shift_pct: nothing capped, nothing said.
    p = blank(r.weights)
    rr.shed(r, {"a": 50.0}, {}, {}, p)
    assert p.held_back == [] and p.weights_after == {"a": 30, "b": 70}


def test_shed_with_nowhere_to_go_holds_and_says_so() -> None:
    # The fleet is far over: each region is held to 1.25 x its usable capacity, where b is.
    caps = {"a": rc("a", 1, 6), "b": rc("b", 2, 2.5)}
    r = rule({"a": 80, "b": 20}, caps)
    p = blank(r.weights)
    rr.shed(r, {"a": 20.0}, {}, {}, p)
    assert p.action == "hold" and p.weights_after == r.weights
    assert p.held_back == [
        "b has no headroom (load 2.5 of 2 concurrency usable at the fleet's 1.25 x)",
        "no healthy region with headroom to take 20%",
    ]


def test_what_does_not_fit_stays_and_is_pre_scaled() -> None:
    # b has 2.4 of headroom at 0.1 a point: 24 points of the 30.
    caps = {"a": rc("a", 5, 6), "b": rc("b", 6.4, 4, per_replica=4, ready=2)}
    r = rule({"a": 60, "b": 40}, caps)
    p = blank(r.weights)
    rr.shed(r, {"a": 30.0}, {}, {"b": 4}, p)
    assert p.weights_after == {"a": 36, "b": 64} and p.moved_pct == 24
    # 64 + 6 = 70 points of 0.1 is 7: three replicas of 3.2.
    assert p.prescale == {"b": 3}
    assert p.held_back == [
        "6% of the excess stays: the targets are at their headroom (b 24.0 points)",
        "b: pre-scale to 3 replicas for the share that waits",
    ]


def test_half_a_point_that_does_not_fit_is_said_and_less_is_not() -> None:
    caps = {"a": rc("a", 1, 6), "b": rc("b", 100, 2)}
    r = rule({"a": 60, "b": 40}, caps)
    p = blank(r.weights)
    rr.shed(r, {"a": 20.5}, {}, {}, p)
    assert p.weights_after == {"a": 40, "b": 60}
    assert p.held_back == ["0% of the excess stays: the targets are at their headroom (b 100.0 points)"]
    p = blank(r.weights)
    rr.shed(r, {"a": 20.4}, {}, {}, p)
    assert p.weights_after == {"a": 40, "b": 60} and p.held_back == []


def test_a_move_below_the_minimum_step_waits_unless_it_is_the_whole_excess() -> None:
    # b takes 3 points (0.375 at 0.125), of an excess of 20: under the 5-point step, it waits.
    caps = {"a": rc("a", 5.8, 6), "b": rc("b", 4.375, 4)}
    r = rule({"a": 68, "b": 32}, caps)
    p = blank(r.weights)
    rr.shed(r, {"a": 20.0}, {}, {}, p)
    assert p.action == "hold" and p.weights_after == r.weights
    assert p.held_back[-1] == "a move of 3% is below min_step_pct 5%"
    # The whole excess is 3 points: it moves.
    p = blank(r.weights)
    rr.shed(r, {"a": 3.0}, {}, {}, p)
    assert p.action == "shed" and p.weights_after == {"a": 65, "b": 35} and p.moved_pct == 3
    # Exactly the minimum step moves.
    caps = {"a": rc("a", 5.8, 6), "b": rc("b", 4.625, 4)}
    r = rule({"a": 68, "b": 32}, caps)
    p = blank(r.weights)
    rr.shed(r, {"a": 20.0}, {}, {}, p)
    assert p.action == "shed" and p.weights_after == {"a": 63, "b": 37}
    # Less than a whole point fits: nothing moves, and no step to speak of.
    caps = {"a": rc("a", 5.8, 6), "b": rc("b", 4.0625, 4)}
    r = rule({"a": 68, "b": 32}, caps)
    p = blank(r.weights)
    rr.shed(r, {"a": 20.0}, {}, {}, p)
    assert p.action == "hold" and not any(h.startswith("a move of") for h in p.held_back)


def test_shed_never_past_the_whole_points_a_targets_headroom_holds() -> None:
    # b and c each hold 2.5 points (0.3125 at 0.125): 2 whole points each, 4 of the 10.
    caps = {"a": rc("a", 5.8, 6), "b": rc("b", 4.3125, 4), "c": rc("c", 4.3125, 4)}
    r = rule({"a": 36, "b": 32, "c": 32}, caps)
    p = blank(r.weights)
    rr.shed(r, {"a": 10.0}, {}, {}, p)
    assert p.action == "hold"
    assert p.held_back == [
        "6% of the excess stays: the targets are at their headroom (b 2.5 points, c 2.5 points)",
        "a move of 4% is below min_step_pct 5%",
    ]


def test_shed_pre_scales_only_for_what_waits() -> None:
    # b takes the whole 16 points its headroom holds: 2 + 2 = 4 on one replica of 4, no more needed.
    caps = {"a": rc("a", 10, 12), "b": rc("b", 4, 2, per_replica=5)}
    r = rule({"a": 84, "b": 16}, caps)
    p = blank(r.weights)
    rr.shed(r, {"a": 16.0}, {}, {"b": 4}, p)
    assert p.weights_after == {"a": 68, "b": 32} and p.prescale == {} and p.held_back == []


def test_shed_one_point_when_the_minimum_step_is_one_point() -> None:
    caps = {"a": rc("a", 1, 6), "b": rc("b", 100, 2)}
    r = rule({"a": 60, "b": 40}, caps, limits=LIMITS.model_copy(update={"min_step_pct": 1}))
    p = blank(r.weights)
    rr.shed(r, {"a": 1.0}, {}, {}, p)
    assert p.action == "shed" and p.weights_after == {"a": 59, "b": 41} and p.moved_pct == 1
    assert p.reasons == ["shed a -1 to b +1 (in proportion to headroom)"]


# --- give_back ---------------------------------------------------------------------------------


def test_give_back_returns_toward_the_configured_share_with_the_margin() -> None:
    # a: 6.4 usable at 0.1 a point carries 58.2 points with 10 %; configured 60, now 30.
    caps = {"a": rc("a", 6.4, 3), "b": rc("b", 100, 7)}
    r = rule({"a": 30, "b": 70}, caps, configured={"a": 60, "b": 40})
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.action == "return" and p.weights_after == {"a": 58, "b": 42} and p.moved_pct == 28
    assert p.reasons == [
        "a: capacity back (6.4 concurrency usable carries 58.2 points with the 10% margin): 30 -> 58 of 60, "
        "from b -28"
    ]
    assert p.held_back == []


def test_give_back_at_most_max_shift_pct_a_step() -> None:
    caps = {"a": rc("a", 100, 1), "b": rc("b", 100, 9)}
    r = rule({"a": 10, "b": 90}, caps, configured={"a": 80, "b": 20},
             limits=LIMITS.model_copy(update={"max_shift_pct": 25}))  # fmt: skip
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.weights_after == {"a": 35, "b": 65} and p.moved_pct == 25
    assert p.reasons == [
        "a: capacity back (100 concurrency usable carries 80.0 points with the 10% margin): 10 -> 35 of 80, "
        "from b -25"
    ]


def test_give_back_shares_the_budget_between_regions_and_takes_from_each_surplus() -> None:
    caps = {"a": rc("a", 100, 1), "b": rc("b", 100, 1), "c": rc("c", 100, 8), "d": rc("d", 100, 1)}
    weights = {"a": 10, "b": 10, "c": 70, "d": 10}
    r = rule(weights, caps, configured={"a": 30, "b": 30, "c": 30, "d": 10},
             limits=LIMITS.model_copy(update={"max_shift_pct": 30}))  # fmt: skip
    p = blank(weights)
    rr.give_back(r, {}, p)
    # 30 points a step: a gets its 20, b the 10 left; d is at its share and gives nothing.
    assert p.weights_after == {"a": 30, "b": 20, "c": 40, "d": 10} and p.moved_pct == 30
    assert [x.split(": ")[0] for x in p.reasons] == ["a", "b"]
    assert p.reasons[1].endswith("10 -> 20 of 30, from c -10")


def test_give_back_stops_when_the_steps_budget_is_spent() -> None:
    caps = {"a": rc("a", 100, 1), "b": rc("b", 100, 1), "c": rc("c", 100, 7), "d": rc("d", 100, 1)}
    weights = {"a": 10, "b": 10, "c": 70, "d": 10}
    configured = {"a": 30, "b": 30, "c": 20, "d": 20}
    # 30 a step: a 20, b 10; nothing left for d, and nothing said of it.
    r = rule(weights, caps, configured=configured, limits=LIMITS.model_copy(update={"max_shift_pct": 30}))
    p = blank(weights)
    rr.give_back(r, {}, p)
    assert p.weights_after == {"a": 30, "b": 20, "c": 40, "d": 10} and p.held_back == []
    # 21 a step: a 20; the one point left is under the step for b and d, and that is said.
    r = rule(weights, caps, configured=configured, limits=LIMITS.model_copy(update={"max_shift_pct": 21}))
    p = blank(weights)
    rr.give_back(r, {}, p)
    assert p.weights_after == {"a": 30, "b": 10, "c": 50, "d": 10}
    assert p.held_back == [
        "b: 100 concurrency usable carries 30.0 points with the 10% margin; it stays at 10 of 30",
        "d: 100 concurrency usable carries 20.0 points with the 10% margin; it stays at 10 of 20",
    ]


def test_give_back_passes_over_a_region_at_or_above_its_share() -> None:
    caps = {"a": rc("a", 100, 7), "b": rc("b", 100, 3)}
    r = rule({"a": 70, "b": 30}, caps, configured={"a": 40, "b": 60})
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.weights_after == {"a": 40, "b": 60}
    assert p.reasons == [
        "b: capacity back (100 concurrency usable carries 60.0 points with the 10% margin): 30 -> 60 of 60, "
        "from a -30"
    ]


def test_give_back_takes_a_surplus_of_one_point_and_never_a_part_of_one() -> None:
    caps = {"a": rc("a", 100, 1), "b": rc("b", 100, 4.1), "c": rc("c", 100, 4.9)}
    r = rule({"a": 10, "b": 41, "c": 49}, caps, configured={"a": 20, "b": 40, "c": 40})
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.weights_after == {"a": 20, "b": 40, "c": 40}
    assert p.reasons[0].endswith("10 -> 20 of 20, from b -1, c -9")
    # Configured 1 : 1 : 1 is 33.3 each: b and c are 1.7 over, one whole point each to give.
    caps = {"a": rc("a", 100, 3), "b": rc("b", 100, 3.5), "c": rc("c", 100, 3.5)}
    r = rule({"a": 30, "b": 35, "c": 35}, caps, configured={"a": 1, "b": 1, "c": 1})
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.weights_after == {"a": 32, "b": 34, "c": 34}
    assert p.reasons == [
        "a: capacity back (100 concurrency usable carries 33.3 points with the 10% margin): 30 -> 32 of 33, "
        "from b -1, c -1"
    ]


def test_give_back_the_margin_is_hysteresis_pct() -> None:
    # 5 usable at 0.125 a point with 25 %: 5 / 0.15625 = 32 points, where it is.
    caps = {"a": rc("a", 5, 4), "b": rc("b", 100, 8.5)}
    r = rule({"a": 32, "b": 68}, caps, configured={"a": 60, "b": 40},
             limits=LIMITS.model_copy(update={"hysteresis_pct": 25}))  # fmt: skip
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.action == "hold"
    assert p.held_back == [
        "a: 5 concurrency usable carries 32.0 points with the 25% margin; it stays at 32 of 60"
    ]


def test_give_back_surplus_is_taken_in_proportion() -> None:
    caps = {"a": rc("a", 100, 1), "b": rc("b", 100, 4), "c": rc("c", 100, 4)}
    r = rule({"a": 10, "b": 60, "c": 30}, caps, configured={"a": 40, "b": 40, "c": 20})
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    # 30 points from surpluses of 20 and 10.
    assert p.weights_after == {"a": 40, "b": 40, "c": 20}
    assert p.reasons[0].endswith("10 -> 40 of 40, from b -20, c -10")


def test_give_back_skips_what_is_not_short_by_half_a_point() -> None:
    caps = {"a": rc("a", 100, 1), "b": rc("b", 100, 1)}
    # Configured 1 : 1 of 101 is 50.5 each: a is short by exactly half a point, so it is looked at,
    # but there is no whole point to give it.
    r = rule({"a": 50, "b": 51}, caps, configured={"a": 1, "b": 1})
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.action == "hold" and p.weights_after == {"a": 50, "b": 51}
    assert p.held_back == [
        "a: 100 concurrency usable carries 50.5 points with the 10% margin; it stays at 50 of 50"
    ]
    # Less than half a point short: nothing to do, nothing said.
    r = rule({"a": 50, "b": 50}, caps, configured={"a": 201, "b": 199})
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.action == "hold" and p.held_back == [] and p.reasons == []


def test_give_back_holds_for_a_region_it_may_not_trust() -> None:
    caps = {
        "a": rc("a", 100, 1),  # breaching
        "b": rc("b", 100, 1, ttft=900),  # over the objective now
        "c": rc("c", 0, 0, known=False),
        "d": rc("d", 100, 1),  # not healthy
        "f": rc("f", 100, 50),
    }
    weights = {"a": 10, "b": 10, "c": 10, "d": 10, "e": 10, "f": 50}  # e: not read
    r = rule(weights, caps, configured=dict.fromkeys(weights, 1), healthy=set(weights) - {"d"}, slo=SLO)
    p = blank(weights)
    rr.give_back(r, {"a": ["slow"]}, p)
    assert p.action == "hold"
    assert p.held_back == [
        f"{x}: below its configured share, but not healthy, known and within the objective" for x in "abcde"
    ]


def test_give_back_holds_a_step_it_cannot_carry() -> None:
    # 6.4 usable at 0.2 a point carries 29.1 points with the margin: it is at 29 already.
    caps = {"a": rc("a", 6.4, 5.8), "b": rc("b", 100, 7.1)}
    r = rule({"a": 29, "b": 71}, caps, configured={"a": 60, "b": 40})
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.action == "hold"
    assert p.held_back == [
        "a: 6.4 concurrency usable carries 29.1 points with the 10% margin; it stays at 29 of 60"
    ]


def test_give_back_a_step_under_the_minimum_waits_unless_it_completes_the_return() -> None:
    # a carries 33 points; 3 more is under the 5-point step, and not the whole way to 60.
    caps = {"a": rc("a", 3.63, 3.0), "b": rc("b", 100, 7)}
    r = rule({"a": 30, "b": 70}, caps, configured={"a": 60, "b": 40})
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.action == "hold" and p.held_back[0].startswith("a: 3.63 concurrency usable carries 33.0 points")
    # 3 points that complete the return move.
    r = rule({"a": 57, "b": 43}, {"a": rc("a", 100, 5.7), "b": rc("b", 100, 4.3)},
             configured={"a": 60, "b": 40})  # fmt: skip
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.action == "return" and p.weights_after == {"a": 60, "b": 40} and p.moved_pct == 3
    # So does the last single point.
    r = rule({"a": 59, "b": 41}, {"a": rc("a", 100, 5.9), "b": rc("b", 100, 4.1)},
             configured={"a": 60, "b": 40})  # fmt: skip
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.action == "return" and p.weights_after == {"a": 60, "b": 40} and p.moved_pct == 1
    # A step to one point short of the configured share does not complete it.
    r = rule({"a": 56, "b": 44}, {"a": rc("a", 6.545, 5.6), "b": rc("b", 100, 4.4)},
             configured={"a": 60, "b": 40})  # fmt: skip
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.action == "hold" and p.held_back == [
        "a: 6.54 concurrency usable carries 59.5 points with the 10% margin; it stays at 56 of 60"
    ]
    # Exactly the minimum step moves though it does not complete.
    caps = {"a": rc("a", 3.85, 3.0), "b": rc("b", 100, 7)}
    r = rule({"a": 30, "b": 70}, caps, configured={"a": 60, "b": 40})
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.weights_after == {"a": 35, "b": 65}


def test_give_back_with_no_load_figure_returns_the_whole_configured_share() -> None:
    caps = {"a": rc("a", 8, 0), "b": rc("b", 8, 0)}
    r = rule({"a": 30, "b": 70}, caps, configured={"a": 60, "b": 40})
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.weights_after == {"a": 60, "b": 40}
    assert p.reasons == [
        "a: capacity back (8 concurrency usable carries 60.0 points with the 10% margin): 30 -> 60 of 60, "
        "from b -30"
    ]


def test_give_back_never_past_one_weighted_record() -> None:
    caps = {"a": rc("a", 8, 0), "b": rc("b", 8, 0)}
    r = rule({"a": 200, "b": 300}, caps, configured={"a": 300, "b": 200},
             limits=LIMITS.model_copy(update={"max_shift_pct": 100}))  # fmt: skip
    p = blank(r.weights)
    rr.give_back(r, {}, p)
    assert p.weights_after == {"a": 255, "b": 245}
