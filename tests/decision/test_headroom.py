"""headroom.py: capacity in weight points, spreading share, and largest-remainder rounding."""

from __future__ import annotations

import pytest

from drctl.decision import DecisionConfig
from drctl.decision.headroom import (
    largest_remainder,
    level_fill,
    load_per_point,
    spread,
    usable,
    usable_points,
)
from tests.decision.facts import capacity, region

CFG = DecisionConfig(target_utilisation=0.5)


def test_usable_is_ready_times_per_replica_times_utilisation() -> None:
    assert usable(region("a", 50, capacity=capacity(ready=3, per_replica=10.0, loading=4)), CFG) == 15.0
    assert usable(region("a", 50, capacity=capacity(per_replica=None)), CFG) is None
    assert usable(region("a", 50, capacity=None), CFG) is None


def test_load_per_point_from_the_regions_with_load_and_weight() -> None:
    regions = {
        "a": region("a", 50, capacity=capacity(load=30.0)),
        "b": region("b", 50, capacity=capacity(load=10.0)),
        "c": region("c", 0, capacity=capacity(load=None)),
        "d": region("d", 0, capacity=None),
    }
    every = set(regions)
    assert load_per_point(regions, {"a": 60, "b": 20, "c": 20, "d": 0}, every) == 0.5
    assert load_per_point(regions, {"a": 60, "b": 20, "c": 20, "d": 0}, {"a"}) == 0.5
    assert load_per_point(regions, {"a": 60, "b": 20, "c": 20, "d": 0}, {"b"}) == 0.5
    assert load_per_point(regions, {"a": 40, "b": 60, "c": 0, "d": 0}, {"a"}) == 0.75
    assert load_per_point(regions, {"a": 40, "b": 60, "c": 0, "d": 0}, {"c", "d"}) is None
    assert load_per_point(regions, {"a": 0, "b": 0, "c": 100, "d": 0}, every) is None
    idle = {"a": region("a", 50, capacity=capacity(load=0.0))}
    assert load_per_point(idle, {"a": 100}, {"a"}) is None
    tiny = {"a": region("a", 50, capacity=capacity(load=0.9e-6))}
    assert load_per_point(tiny, {"a": 100}, {"a"}) is None
    least = {"a": region("a", 50, capacity=capacity(load=1e-6))}
    assert load_per_point(least, {"a": 100}, {"a"}) == pytest.approx(1e-8)


def test_usable_points() -> None:
    regions = {
        "a": region("a", 50, capacity=capacity(ready=2, per_replica=10.0, load=5.0)),
        "b": region("b", 50, capacity=capacity(per_replica=None, load=5.0)),
    }
    # 10 load over 100 points: 0.1 a point; a's usable 10 is 100 points.
    assert usable_points(regions, {"a": 50, "b": 50}, CFG, {"a", "b"}) == {"a": 100.0}
    assert usable_points({"b": regions["b"]}, {"b": 0}, CFG, {"b"}) == {}


def test_spread_by_headroom_when_it_holds_the_amount() -> None:
    out = spread(30, {"a": 0.0, "b": 40.0, "c": 30.0}, ["b", "c"], {"b": 60.0, "c": 70.0}, {})
    assert out == pytest.approx({"a": 0.0, "b": 50.0, "c": 50.0})


def test_spread_exactly_the_headroom_fills_both_to_capacity() -> None:
    out = spread(50, {"a": 0.0, "b": 40.0, "c": 30.0}, ["b", "c"], {"b": 60.0, "c": 60.0}, {})
    assert out == pytest.approx({"a": 0.0, "b": 60.0, "c": 60.0})


def test_spread_past_the_headroom_evens_the_level_without_lowering_anyone() -> None:
    # The three-region incident: b holds 34 on capacity 20, c 28 on capacity 40, 38 to place.
    out = spread(38, {"a": 0.0, "b": 34.0, "c": 28.0}, ["b", "c"], {"b": 20.0, "c": 40.0}, {})
    assert out["b"] == pytest.approx(34.0)
    assert out["c"] == pytest.approx(66.0)


def test_spread_without_figures_goes_by_home_weight() -> None:
    out = spread(40, {"a": 0.0, "b": 30.0, "c": 30.0}, ["b", "c"], {}, {"b": 30, "c": 10})
    assert out == pytest.approx({"a": 0.0, "b": 60.0, "c": 40.0})


def test_spread_home_weights_all_zero_share_equally() -> None:
    out = spread(40, {"a": 0.0, "b": 30.0, "c": 30.0}, ["b", "c"], {}, {"b": 0, "c": 0})
    assert out == pytest.approx({"a": 0.0, "b": 50.0, "c": 50.0})


def test_spread_mixed_figures_caps_the_known_one_while_the_other_is_open() -> None:
    out = spread(40, {"a": 0.0, "b": 30.0, "c": 30.0}, ["b", "c"], {"b": 35.0}, {"b": 50, "c": 50})
    assert out == pytest.approx({"a": 0.0, "b": 35.0, "c": 65.0})


def test_spread_all_capped_goes_by_home_weight() -> None:
    out = spread(40, {"a": 0.0, "b": 30.0, "c": 30.0}, ["b", "c"], {"b": 0.0, "c": 0.0}, {"b": 3, "c": 1})
    assert out == pytest.approx({"a": 0.0, "b": 60.0, "c": 40.0})


def test_spread_nothing_to_do() -> None:
    base = {"a": 10.0, "b": 90.0}
    assert spread(0, base, ["b"], {}, {}) == base
    assert spread(-1, base, ["b"], {}, {}) == base
    assert spread(10, base, [], {}, {}) == base


def test_level_fill_lifts_the_low_ones_to_one_level() -> None:
    out = level_fill(100, {"a": 10.0, "b": 10.0}, ["a", "b"], {"a": 10.0, "b": 30.0})
    assert out == pytest.approx({"a": 25.0, "b": 75.0})
    assert sum(out.values()) == pytest.approx(100.0)
    high = level_fill(100, {"a": 60.0, "b": 0.0}, ["a", "b"], {"a": 10.0, "b": 10.0})
    assert high == pytest.approx({"a": 60.0, "b": 40.0})


@pytest.mark.parametrize(
    ("shares", "want"),
    [
        ({"a": 1.0, "b": 1.0, "c": 1.0}, {"a": 34, "b": 33, "c": 33}),
        ({"a": 66.5, "b": 33.5}, {"a": 67, "b": 33}),
        ({"b": 33.5, "a": 66.5}, {"b": 33, "a": 67}),
        ({"a": 50.5, "b": 49.5, "c": 0.0}, {"a": 51, "b": 49, "c": 0}),
        ({"a": 0.0, "b": 0.0}, {"a": 0, "b": 0}),
        ({"a": -5.0, "b": 10.0}, {"a": 0, "b": 100}),
        ({"a": 2.0, "b": 2.0}, {"a": 50, "b": 50}),
        ({"a": 10.0, "b": 20.0, "c": 30.0, "d": 40.0}, {"a": 10, "b": 20, "c": 30, "d": 40}),
        ({"x": 1.0, "y": 2.0, "z": 3.0}, {"x": 17, "y": 33, "z": 50}),
    ],
)
def test_largest_remainder(shares: dict[str, float], want: dict[str, int]) -> None:
    assert largest_remainder(shares) == want


def test_a_region_with_no_weight_says_nothing_of_a_point() -> None:
    regions = {
        "a": region("a", 50, capacity=capacity(load=30.0)),
        "b": region("b", 50, capacity=capacity(load=10.0)),
    }
    assert load_per_point(regions, {"a": 60, "b": 0}, {"a", "b"}) == 0.5
