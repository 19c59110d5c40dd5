"""The proportional rebalancing rule: what sheds, where it goes, what stays, and how it returns."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from drctl.config.capacity import RebalanceLimits, SloConfig
from drctl.models.capacity import (
    CapacitySpec,
    RebalancePlan,
    RegionCapacity,
    RegionSignals,
    plan_rebalance,
    region_capacity,
)
from drctl.models.share_moves import apportion

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)
LIMITS = RebalanceLimits(min_step_pct=5, max_shift_pct=50, hysteresis_pct=10, target_utilisation=0.8)
SLO = SloConfig(ttft_p99_ms=200, error_rate=0.01)
PER = 4  # concurrent requests a replica serves (workload.max_concurrency_per_replica)


def cap(region: str, ready: int, load: float, *, per: int = PER, **kw: object) -> RegionCapacity:
    """A region with `ready` replicas of `per` carrying `load` concurrent requests (beyond the slots: waiting)."""
    running = min(load, ready * per)
    s = RegionSignals.model_validate(
        {
            "region": region,
            "ready_replicas": ready,
            "desired_replicas": kw.pop("desired", ready),
            "running": running,
            "waiting": load - running,
            "window_s": 5.0,
            "measured_at": T0,
            **kw,
        }
    )
    return region_capacity(s, CapacitySpec(max_concurrency_per_replica=per, target_utilisation=0.8))


class Fleet:
    """A fleet whose load follows the weights: each weight point brings `per_point` concurrent requests."""

    def __init__(self, replicas: dict[str, int], weights: dict[str, int], per_point: float) -> None:
        self.replicas, self.weights, self.per_point = replicas, dict(weights), per_point
        self.configured = dict(weights)
        self.actions: list[str] = []

    def caps(self) -> dict[str, RegionCapacity]:
        return {r: cap(r, n, self.weights[r] * self.per_point) for r, n in self.replicas.items()}

    def tick(self, limits: RebalanceLimits = LIMITS, **kw: object) -> RebalancePlan:
        plan = plan_rebalance(
            self.weights,
            self.configured,
            self.caps(),
            {},
            set(self.replicas),
            limits,
            {r: 8 for r in self.replicas},
            **kw,  # type: ignore[arg-type]
        )
        self.weights = plan.weights_after
        self.actions.append(plan.action)
        return plan


def plan(
    weights: dict[str, int],
    caps: dict[str, RegionCapacity],
    *,
    configured: dict[str, int] | None = None,
    breaching: dict[str, list[str]] | None = None,
    healthy: set[str] | None = None,
    limits: RebalanceLimits = LIMITS,
    max_replicas: dict[str, int] | None = None,
    **kw: object,
) -> RebalancePlan:
    return plan_rebalance(
        weights,
        configured or dict(weights),
        caps,
        breaching or {},
        set(weights) if healthy is None else healthy,
        limits,
        max_replicas if max_replicas is not None else {r: c.desired_replicas for r, c in caps.items()},
        **kw,  # type: ignore[arg-type]
    )


def test_two_regions_the_short_one_sheds_its_excess_only() -> None:
    # us-west-1 lost one of its two replicas: 6 concurrent requests on 1 x 4 (3.2 usable).
    # us-east-1 carries 4 on 2 x 4 (6.4 usable): 2.4 of headroom, at 0.1 a point = 24 points.
    p = plan(
        {"us-west-1": 60, "us-east-1": 40},
        {"us-west-1": cap("us-west-1", 1, 6), "us-east-1": cap("us-east-1", 2, 4)},
    )
    assert p.action == "shed"
    # Together they carry 10 on 9.6 usable, 1.04 x: each region is held to 1.04 x its own usable, so
    # the excess is 1 - 3.2 x 1.04 / 6 = 44 % of 60 = 26.7 points, and us-east-1 takes 26 of them.
    assert p.weights_after == {"us-west-1": 34, "us-east-1": 66}
    assert p.moved_pct == 26 and p.moves == {"us-west-1": -26, "us-east-1": 26}
    assert p.reasons[0].startswith(
        "us-west-1: load 6 concurrency > usable 3.2 (1 ready x 4 configured x 0.8); the fleet carries 1.04 x"
    )
    assert any("excess stays: the targets are at their headroom" in h for h in p.held_back)
    # The target ends as loaded as the source, within its capacity: 66 x 0.1 = 6.6 of 8.
    east, west = p.capacities["us-east-1"], p.capacities["us-west-1"]
    assert 66 * 0.1 <= east.usable * 1.0417 + 1e-6 and 66 * 0.1 <= east.capacity
    assert abs(66 * 0.1 / east.usable - 34 * 0.1 / west.usable) < 0.05


def test_when_the_fleet_is_over_its_usable_capacity_the_overload_is_shared_and_not_handed_back() -> None:
    # 1 + 2 replicas of 16 (38.4 usable, 48 slots) carry 44.8: 1.17 x. Shared alike, 1/3 : 2/3.
    west, east = cap("us-west-1", 1, 14.9, per=16), cap("us-east-1", 2, 29.9, per=16)
    p = plan({"us-west-1": 33, "us-east-1": 67}, {"us-west-1": west, "us-east-1": east})
    assert p.action == "hold", p.reasons  # neither is more loaded than the other: nothing moves
    # A reading later, us-east-1 has a little more: it does not hand share to the region that shed.
    east = cap("us-east-1", 2, 31.0, per=16)
    p = plan(
        {"us-west-1": 33, "us-east-1": 67},
        {"us-west-1": cap("us-west-1", 1, 14.9, per=16), "us-east-1": east},
    )
    assert p.moved_pct <= 5, p.reasons
    # Past the fleet's whole capacity, no target is given more than its own: 1 / 0.8 x usable.
    far = plan(
        {"us-west-1": 60, "us-east-1": 40},
        {"us-west-1": cap("us-west-1", 1, 60, per=16), "us-east-1": cap("us-east-1", 2, 30, per=16)},
    )
    assert far.weights_after["us-east-1"] - 40 <= 4, far.reasons  # 32 slots: 2 more requests at most


def test_three_regions_share_the_excess_in_proportion_to_headroom() -> None:
    caps = {
        "us-west-1": cap("us-west-1", 1, 10),  # 3.2 usable: 6.8 short, 68 % of 50 points
        "us-east-1": cap("us-east-1", 4, 6),  # 12.8 usable: 6.8 headroom at 0.2 a point = 34 points
        "eu-west-1": cap("eu-west-1", 2, 3),  # 6.4 usable: 3.4 headroom at 0.15 a point = 22.7 points
    }
    p = plan({"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20}, caps)
    assert p.action == "shed" and sum(p.weights_after.values()) == 100
    # 34 points of excess, split 34 : 22.7 = 60 : 40.
    assert p.moves == {"us-west-1": -34, "us-east-1": 20, "eu-west-1": 14}
    assert p.held_back == []


def test_a_target_without_headroom_takes_nothing_and_says_so() -> None:
    caps = {
        "us-west-1": cap("us-west-1", 1, 6),
        "us-east-1": cap("us-east-1", 2, 6.4),  # exactly at its usable capacity
        "eu-west-1": cap("eu-west-1", 4, 2),
    }
    p = plan({"us-west-1": 60, "us-east-1": 20, "eu-west-1": 20}, caps)
    assert p.action == "shed" and p.moves["us-west-1"] < 0
    assert "us-east-1" not in p.moves
    assert "us-east-1 has no headroom (load 6.4 of 6.4 concurrency usable)" in p.held_back


def test_no_target_at_all_holds() -> None:
    caps = {"us-west-1": cap("us-west-1", 1, 6), "us-east-1": cap("us-east-1", 1, 5)}
    p = plan({"us-west-1": 60, "us-east-1": 40}, caps)
    assert p.action == "hold" and p.weights_after == p.weights_before and p.moved_pct == 0
    assert any(h.startswith("no healthy region with headroom to take") for h in p.held_back)
    assert p.reasons[-1] == "excess found, but nothing could move: see held_back"
    # A single region has nowhere to shed to.
    alone = plan({"us-west-1": 100}, {"us-west-1": cap("us-west-1", 1, 6)})
    assert alone.action == "hold"


def test_a_down_or_unknown_region_neither_sheds_nor_receives() -> None:
    caps = {
        "us-west-1": cap("us-west-1", 1, 6),
        "us-east-1": cap("us-east-1", 4, 2),
        "eu-west-1": cap("eu-west-1", 0, 0, desired=2),  # down: the failover owns it
    }
    weights = {"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20}
    p = plan(weights, caps, healthy={"us-west-1", "us-east-1"})
    assert "eu-west-1" not in p.moves and "eu-west-1: not healthy, takes no share" in p.held_back
    down = plan(weights, caps, healthy={"us-east-1", "eu-west-1"})  # us-west-1 itself not healthy
    assert down.action == "hold"
    unknown = RegionCapacity(
        region="us-east-1",
        capacity=0,
        load=0,
        usable=0,
        headroom=0,
        unit="concurrency",
        per_replica=0,
        source="learned",
        known=False,
        problems=["capacity not learned yet"],
    )
    p = plan({"us-west-1": 60, "us-east-1": 40}, {"us-west-1": caps["us-west-1"], "us-east-1": unknown})
    assert p.action == "hold"
    assert "us-east-1: capacity unknown, takes no share (capacity not learned yet)" in p.held_back


def test_learned_capacity_sheds_like_configured_capacity() -> None:
    def learned(region: str, ready: int, running: float, waiting: float) -> RegionCapacity:
        s = RegionSignals(
            region=region,
            ready_replicas=ready,
            desired_replicas=ready,
            running=running,
            waiting=waiting,
            window_s=5,
            measured_at=T0,
        )
        return region_capacity(s, CapacitySpec(target_utilisation=0.8), known_ceiling=4)

    caps = {"us-west-1": learned("us-west-1", 1, 4, 2), "us-east-1": learned("us-east-1", 2, 4, 0)}
    assert caps["us-west-1"].source == "learned" and caps["us-west-1"].capacity == 4
    learned_plan = plan({"us-west-1": 60, "us-east-1": 40}, caps)
    configured_plan = plan(
        {"us-west-1": 60, "us-east-1": 40},
        {"us-west-1": cap("us-west-1", 1, 6), "us-east-1": cap("us-east-1", 2, 4)},
    )
    assert learned_plan.weights_after == configured_plan.weights_after == {"us-west-1": 34, "us-east-1": 66}


def test_an_excess_below_the_minimum_step_is_not_moved() -> None:
    # 3.4 on 3.2 usable: 6 % of a 60-point share is 3.5 points, under the 5 % step.
    p = plan(
        {"us-west-1": 60, "us-east-1": 40},
        {"us-west-1": cap("us-west-1", 1, 3.4), "us-east-1": cap("us-east-1", 4, 2)},
    )
    assert p.action == "hold"
    assert p.held_back == ["us-west-1: excess 4% < min_step_pct 5%"]


def test_max_shift_per_step_caps_the_move() -> None:
    caps = {"us-west-1": cap("us-west-1", 1, 40), "us-east-1": cap("us-east-1", 8, 1)}
    p = plan({"us-west-1": 80, "us-east-1": 20}, caps, limits=LIMITS.model_copy(update={"max_shift_pct": 25}))
    assert p.moved_pct == 25 and p.weights_after == {"us-west-1": 55, "us-east-1": 45}
    # 41 on 28.8 usable is past the fleet's whole capacity: held to 1 / 0.8 = 1.25 x, 1 - 4 / 40 = 90 %.
    assert p.held_back[0] == "max_shift_pct 25% caps this step at 25% of the 72% excess"


def test_what_does_not_fit_is_pre_scaled_where_the_target_can_scale() -> None:
    caps = {"us-west-1": cap("us-west-1", 1, 6), "us-east-1": cap("us-east-1", 2, 4)}
    p = plan({"us-west-1": 60, "us-east-1": 40}, caps, max_replicas={"us-west-1": 2, "us-east-1": 4})
    # 26.7 points of excess, 26 fit now; carrying 66.7 points (6.7) at 3.2 a replica needs 3 replicas.
    assert p.prescale == {"us-east-1": 3}
    assert "us-east-1: pre-scale to 3 replicas for the share that waits" in p.held_back
    assert p.weights_after == {"us-west-1": 34, "us-east-1": 66}  # the move itself waits for nothing
    # At its max_replicas a target is not pre-scaled.
    assert plan({"us-west-1": 60, "us-east-1": 40}, caps, max_replicas={"us-east-1": 2}).prescale == {}


def test_a_breach_alone_sheds_in_proportion_to_how_far_it_is_over() -> None:
    # Capacity is fine (4 on 6.4 usable), but TTFT p99 is 400 ms against 200: half the share goes.
    west = cap("us-west-1", 2, 4, ttft_p99_ms=400)
    assert west.headroom > 0
    p = plan(
        {"us-west-1": 60, "us-east-1": 40},
        {"us-west-1": west, "us-east-1": cap("us-east-1", 8, 4)},
        breaching={"us-west-1": ["us-west-1 TTFT p99 400 ms > objective 200 ms"]},
        slo=SLO,
    )
    assert p.action == "shed" and p.weights_after == {"us-west-1": 30, "us-east-1": 70}
    assert (
        p.reasons[0]
        == "us-west-1: us-west-1 TTFT p99 400 ms > objective 200 ms (sustained): shed 50% of its share"
    )
    # A breaching region never receives share, even with headroom: it sheds too, and nothing is left to take it.
    p = plan(
        {"us-west-1": 60, "us-east-1": 40},
        {"us-west-1": cap("us-west-1", 1, 6), "us-east-1": cap("us-east-1", 8, 1)},
        breaching={"us-east-1": ["slow"]},
    )
    assert p.action == "hold" and "no healthy region with headroom to take 48%" in p.held_back


def test_a_shortfall_not_yet_sustained_waits() -> None:
    caps = {"us-west-1": cap("us-west-1", 1, 6), "us-east-1": cap("us-east-1", 4, 2)}
    p = plan({"us-west-1": 60, "us-east-1": 40}, caps, shortfall=set())
    assert p.action == "hold" and p.held_back == ["us-west-1: short of capacity, not yet for 2s"]
    assert plan({"us-west-1": 60, "us-east-1": 40}, caps, shortfall={"us-west-1"}).action == "shed"


def test_share_returns_in_steps_when_capacity_comes_back() -> None:
    # Shed to 20/80 earlier; us-west-1 has its two replicas again.
    fleet = Fleet({"us-west-1": 2, "us-east-1": 4}, {"us-west-1": 20, "us-east-1": 80}, per_point=0.08)
    fleet.configured = {"us-west-1": 60, "us-east-1": 40}
    limits = LIMITS.model_copy(update={"max_shift_pct": 25})
    steps = [fleet.tick(limits) for _ in range(4)]
    assert [s.action for s in steps] == ["return", "return", "hold", "hold"]
    assert [s.weights_after["us-west-1"] for s in steps] == [45, 60, 60, 60]
    assert (
        steps[0].reasons[0].startswith("us-west-1: capacity back (6.4 concurrency usable carries 60.0 points")
    )
    assert steps[2].reasons == ["every region within its capacity and the objective"]


def test_a_return_stops_where_the_margin_ends() -> None:
    # 6.4 usable at 0.1 a point carries 58 points with the 10 % margin: the return stops at 58.
    fleet = Fleet({"us-west-1": 2, "us-east-1": 4}, {"us-west-1": 30, "us-east-1": 70}, per_point=0.1)
    fleet.configured = {"us-west-1": 60, "us-east-1": 40}
    assert fleet.tick().weights_after["us-west-1"] == 58
    p = fleet.tick()
    assert p.action == "hold" and p.held_back[0].startswith(
        "us-west-1: 6.4 concurrency usable carries 58.2 points"
    )


def test_a_region_at_the_threshold_does_not_flap() -> None:
    """Shed once, then hold: the return needs the margin the shed left behind."""
    fleet = Fleet({"us-west-1": 1, "us-east-1": 4}, {"us-west-1": 60, "us-east-1": 40}, per_point=0.1)
    for _ in range(8):
        fleet.tick()
    assert fleet.actions[0] == "shed" and set(fleet.actions[1:]) == {"hold"}
    assert fleet.weights["us-west-1"] * 0.1 <= 3.2 + 1e-9  # within its usable capacity
    # Right at the threshold (load == usable) nothing sheds at all.
    at = Fleet({"us-west-1": 1, "us-east-1": 4}, {"us-west-1": 32, "us-east-1": 68}, per_point=0.1)
    at.tick()
    assert at.actions == ["hold"]


def test_no_flapping_when_the_load_wobbles_around_the_threshold() -> None:
    fleet = Fleet({"us-west-1": 1, "us-east-1": 4}, {"us-west-1": 60, "us-east-1": 40}, per_point=0.1)
    for i in range(30):
        fleet.per_point = 0.1 * (1 + 0.04 * math.sin(i))  # +-4 %, less than the 10 % margin
        fleet.tick()
    sheds_then_returns = sum(
        a == "shed" and b == "return" for a, b in zip(fleet.actions, fleet.actions[1:], strict=False)
    )
    assert sheds_then_returns == 0 and "return" not in fleet.actions


def test_the_last_step_of_a_return_may_be_under_the_minimum() -> None:
    fleet = Fleet({"us-west-1": 2, "us-east-1": 4}, {"us-west-1": 57, "us-east-1": 43}, per_point=0.05)
    fleet.configured = {"us-west-1": 60, "us-east-1": 40}
    assert fleet.tick().weights_after == {"us-west-1": 60, "us-east-1": 40}


def test_rescaled_weights_return_to_the_configured_shares() -> None:
    # A failover rescaled the total to 200; the configured shares are 60/40 of 100.
    fleet = Fleet({"us-west-1": 2, "us-east-1": 4}, {"us-west-1": 60, "us-east-1": 140}, per_point=0.02)
    fleet.configured = {"us-west-1": 60, "us-east-1": 40}
    fleet.tick()
    assert fleet.weights == {"us-west-1": 120, "us-east-1": 80}


def test_apportion_splits_whole_points_under_caps() -> None:
    assert apportion(10, {"a": 1, "b": 1}, {"a": 10, "b": 10}) == {"a": 5, "b": 5}
    assert apportion(10, {"a": 3, "b": 1}, {"a": 4, "b": 10}) == {"a": 4, "b": 6}
    assert apportion(10, {"a": 1, "b": 1}, {"a": 2, "b": 3}) == {"a": 2, "b": 3}
    assert apportion(3, {"a": 1, "b": 1, "c": 1}, {"a": 9, "b": 9, "c": 9}) == {"a": 1, "b": 1, "c": 1}
    assert apportion(2, {"b": 1, "a": 1, "c": 1}, {"a": 9, "b": 9, "c": 9}) == {"a": 1, "b": 1}
    assert apportion(5, {"a": 0, "b": 1}, {"a": 9, "b": 0}) == {}


REGIONS = ["r0", "r1", "r2"]


@st.composite
def fleets(
    draw: st.DrawFn,
) -> tuple[dict[str, int], dict[str, int], dict[str, RegionCapacity], set[str], dict[str, list[str]]]:
    n = draw(st.integers(2, 3))
    names = REGIONS[:n]
    weights = {r: draw(st.integers(0, 255)) for r in names}
    configured = {r: draw(st.integers(0, 100)) for r in names}
    # Load mostly follows the weights (as the global tier splits it), at any utilisation.
    per_point = draw(st.floats(0.005, 0.2))
    ttft = st.sampled_from([None, None, 150.0, 900.0])
    caps = {
        r: cap(
            r, draw(st.integers(0, 6)), weights[r] * per_point * draw(st.floats(0, 3)), ttft_p99_ms=draw(ttft)
        )
        for r in names
    }
    healthy = {r for r in names if draw(st.integers(0, 6)) > 0}
    breaching = {r: ["slow"] for r in names if caps[r].ttft_p99_ms == 900.0}
    return weights, configured, caps, healthy, breaching


@settings(max_examples=300, deadline=None)
@given(fleets(), st.integers(1, 20), st.integers(20, 100))
def test_invariants_hold_for_any_fleet(
    fleet: tuple[dict[str, int], dict[str, int], dict[str, RegionCapacity], set[str], dict[str, list[str]]],
    min_step: int,
    max_shift: int,
) -> None:
    weights, configured, caps, healthy, breaching = fleet
    limits = LIMITS.model_copy(update={"min_step_pct": min_step, "max_shift_pct": max_shift})
    p = plan_rebalance(
        weights, configured, caps, breaching, healthy, limits, dict.fromkeys(weights, 8), slo=SLO
    )
    after, total = p.weights_after, sum(weights.values())
    assert set(after) == set(weights) and all(isinstance(v, int) and v >= 0 for v in after.values())
    assert sum(after.values()) == total
    moved = sum(max(0, d) for d in p.moves.values())
    assert p.moved_pct == (round(moved * 100 / total) if total else 0)
    assert moved <= max(1, math.floor(max_shift * total / 100 + 1e-9))
    if p.action == "hold":
        assert after == weights
    for r, d in p.moves.items():
        assert r in healthy or (p.action == "return" and d < 0)  # only a giver of a return may be another
        if d > 0:
            assert r not in breaching and caps[r].known and after[r] <= 255
        if p.action == "shed" and d < 0:  # only a region short of capacity or breaching sheds
            assert r in breaching or caps[r].headroom < 0
        conf_total = sum(configured.values())
        if p.action == "return" and d > 0:  # a return never overshoots the configured share
            assert conf_total and after[r] <= math.ceil(configured[r] * total / conf_total)
        if p.action == "shed" and d > 0:
            per = caps[r].load / weights[r] if weights[r] and caps[r].load else None
            if per is not None:  # never past the target's capacity (its headroom at the fleet's level)
                assert d * per <= caps[r].capacity - caps[r].load + 1e-6


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(0, 6), min_size=2, max_size=3),
    st.lists(st.integers(1, 100), min_size=3, max_size=3),
    st.floats(0.005, 0.3),
)
def test_a_steady_fleet_settles_without_flapping(
    replicas: list[int], weights: list[int], per_point: float
) -> None:
    """Constant capacity, load following the weights: sheds, then holds; never a return, never a cycle."""
    names = REGIONS[: len(replicas)]
    fleet = Fleet(
        dict(zip(names, replicas, strict=False)), dict(zip(names, weights, strict=False)), per_point
    )
    for _ in range(12):
        fleet.tick()
    assert "return" not in fleet.actions, fleet.actions
    first_hold = fleet.actions.index("hold") if "hold" in fleet.actions else len(fleet.actions)
    assert set(fleet.actions[first_hold:]) <= {"hold"}, fleet.actions


def test_a_target_breaching_now_takes_nothing_even_before_its_window() -> None:
    caps = {
        "us-west-1": cap("us-west-1", 1, 6),
        "us-east-1": cap("us-east-1", 8, 1, ttft_p99_ms=900),  # slow now, not yet for the window
        "eu-west-1": cap("eu-west-1", 4, 1),
    }
    p = plan({"us-west-1": 50, "us-east-1": 25, "eu-west-1": 25}, caps, slo=SLO)
    assert p.action == "shed" and "us-east-1" not in p.moves and p.moves["eu-west-1"] > 0
    assert "us-east-1: breaches the objective, takes no share" in p.held_back
    # Nor does it get share back.
    fleet = plan(
        {"us-west-1": 20, "us-east-1": 80},
        {"us-west-1": cap("us-west-1", 2, 1, ttft_p99_ms=900), "us-east-1": cap("us-east-1", 4, 4)},
        configured={"us-west-1": 60, "us-east-1": 40},
        slo=SLO,
    )
    assert fleet.action == "hold"
    assert fleet.held_back == [
        "us-west-1: below its configured share, but not healthy, known and within the objective"
    ]


def test_no_region_is_given_more_than_one_weighted_record_holds() -> None:
    # Total 400: moving everything onto one region would exceed Route 53's 255.
    caps = {"a": cap("a", 1, 40), "b": cap("b", 64, 1)}
    p = plan({"a": 200, "b": 200}, caps, limits=LIMITS.model_copy(update={"max_shift_pct": 100}))
    assert p.weights_after["b"] == 255 and sum(p.weights_after.values()) == 400
