"""headroom.py: the level search when some receivers already sit above the level, and the capped
spread by home weight when a receiver fills up or carries no home weight."""

from __future__ import annotations

import pytest

from drctl.decision.headroom import largest_remainder, level_fill, load_per_point, spread
from tests.decision.facts import capacity, region


def test_level_fill_leaves_a_receiver_above_the_level_at_its_base() -> None:
    # The level is 0.2: x (50) and y (30) already carry more than 0.2 x 100; only z is lifted.
    got = level_fill(100.0, {"x": 50.0, "y": 30.0, "z": 0.0}, ["x", "y", "z"], dict.fromkeys("xyz", 100.0))
    assert got == pytest.approx({"x": 50.0, "y": 30.0, "z": 20.0})


def test_level_fill_level_below_one_with_one_receiver_above_it() -> None:
    got = level_fill(100.0, {"x": 60.0, "y": 0.0}, ["x", "y"], {"x": 100.0, "y": 100.0})
    assert got == pytest.approx({"x": 60.0, "y": 40.0})


def test_level_fill_in_proportion_to_unequal_capacities() -> None:
    got = level_fill(60.0, {"x": 0.0, "y": 0.0}, ["x", "y"], {"x": 40.0, "y": 80.0})
    assert got == pytest.approx({"x": 20.0, "y": 40.0})


def test_capped_spread_gives_a_remainder_under_a_point_to_the_open_region() -> None:
    # By home weight 1:1, a capped at 10: a takes 10, b 10.25, and the 0.25 left goes to b, not
    # half past a's capacity.
    got = spread(20.5, {"a": 0.0, "b": 0.0}, ["a", "b"], {"a": 10.0}, {"a": 50, "b": 50})
    assert got == pytest.approx({"a": 10.0, "b": 10.5})


def test_capped_spread_open_regions_without_home_weight_share_equally() -> None:
    # a (home 50) fills its 10; b and c have no home weight: the 20 left goes to them evenly.
    got = spread(
        30.0, {"a": 0.0, "b": 0.0, "c": 0.0}, ["a", "b", "c"], {"a": 10.0}, {"a": 50, "b": 0, "c": 0}
    )
    assert got == pytest.approx({"a": 10.0, "b": 10.0, "c": 10.0})


def test_capped_spread_an_open_region_with_one_home_point_takes_the_rest_by_its_weight() -> None:
    # a (home 99) fills its 10; of b (home 1) and c (home 0), only b has weight: it takes the rest.
    got = spread(
        30.0, {"a": 0.0, "b": 0.0, "c": 0.0}, ["a", "b", "c"], {"a": 10.0}, {"a": 99, "b": 1, "c": 0}
    )
    assert got == pytest.approx({"a": 10.0, "b": 20.0, "c": 0.0})


def test_spread_nothing_to_spread_leaves_the_base_even_with_no_room() -> None:
    assert spread(0.0, {"a": 10.0, "b": 5.0}, ["a"], {"a": 10.0}, {"a": 50, "b": 50}) == {"a": 10.0, "b": 5.0}


def test_spread_a_single_point_by_headroom() -> None:
    got = spread(1.0, {"a": 0.0, "b": 0.0, "c": 50.0}, ["a", "b"], {"a": 30.0, "b": 10.0}, {})
    assert got == pytest.approx({"a": 0.75, "b": 0.25, "c": 50.0})


def test_spread_a_receiver_at_its_capacity_has_no_headroom() -> None:
    got = spread(10.0, {"a": 10.0, "b": 0.0}, ["a", "b"], {"a": 10.0, "b": 20.0}, {})
    assert got == pytest.approx({"a": 10.0, "b": 10.0})


def test_spread_past_a_small_total_capacity_evens_out_by_capacity() -> None:
    # Capacities of half a point each: past them, both end at the same fraction, whatever their homes.
    got = spread(2.0, {"a": 0.0, "b": 0.0}, ["a", "b"], {"a": 0.5, "b": 0.5}, {"a": 75, "b": 25})
    assert got == pytest.approx({"a": 1.0, "b": 1.0})


def test_spread_a_receiver_without_home_weight_takes_nothing_while_another_has_some() -> None:
    got = spread(10.0, {"a": 0.0, "b": 0.0}, ["a", "b"], {}, {"a": 50})
    assert got == pytest.approx({"a": 10.0, "b": 0.0})
    assert spread(10.0, {"a": 0.0, "b": 0.0}, ["a", "b"], {}, {"a": 1, "b": 0}) == pytest.approx(
        {"a": 10.0, "b": 0.0}
    )


def test_spread_receivers_of_no_capacity_and_no_home_weight_share_equally() -> None:
    got = spread(10.0, {"a": 0.0, "b": 0.0}, ["a", "b"], {"a": 0.0, "b": 0.0}, {"a": 0, "b": 0})
    assert got == pytest.approx({"a": 5.0, "b": 5.0})


def test_spread_past_every_capacity_the_rest_goes_by_home_weight() -> None:
    got = spread(0.5, {"a": 0.0, "b": 0.0}, ["a", "b"], {"a": 0.0, "b": 0.0}, {"a": 60, "b": 40})
    assert got == pytest.approx({"a": 0.3, "b": 0.2})


def test_capped_spread_a_region_near_its_capacity_still_fills_it() -> None:
    # By home 1:1:0. Round one: a 9.5 (of 10), b 3 (its capacity). Round two: a takes its last 0.5.
    # Then c, of no home weight and unknown capacity, takes the 6 left.
    got = spread(
        19.0, {"a": 0.0, "b": 0.0, "c": 0.0}, ["a", "b", "c"], {"a": 10.0, "b": 3.0}, {"a": 1, "b": 1, "c": 0}
    )
    assert got == pytest.approx({"a": 10.0, "b": 3.0, "c": 6.0})


def test_load_per_point_ignores_a_serving_region_without_a_weight() -> None:
    regions = {
        "a": region("a", 50, capacity=capacity(load=20.0)),
        "d": region("d", 0, capacity=capacity(load=10.0)),
    }
    assert load_per_point(regions, {"a": 40}, {"a", "d"}) == 0.5


def test_load_per_point_from_a_single_point() -> None:
    regions = {"a": region("a", 50, capacity=capacity(load=0.5)), "b": region("b", 50, capacity=None)}
    assert load_per_point(regions, {"a": 1, "b": 99}, {"a", "b"}) == 0.5


def test_largest_remainder_of_shares_under_one_in_all() -> None:
    assert largest_remainder({"a": 0.5, "b": 0.25, "c": 0.25}) == {"a": 50, "b": 25, "c": 25}
