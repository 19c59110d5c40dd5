"""tick.py: who may receive share, direction turns within the window, and how share is spread."""

from __future__ import annotations

import pytest

from drctl.decision import DecisionConfig, DecisionMemory, Verdict
from tests.decision.facts import at, capacity, dead, fleet, loaded, region, remembered, tick_of

CFG = DecisionConfig(interval_s=10, stability_window_s=30)
DOWN = {"verdict": Verdict.DOWN, "consecutive_failures": 3, "since": at(0)}


def test_receivers_are_healthy_regions() -> None:
    ev = fleet([region("a", 50, probe=dead()), region("b", 30), region("c", 20, probe=None)])
    assert tick_of(ev, CFG, at(10), remembered(a=DOWN)).receivers({"a"}) == ["b"]


def test_saturated_receive_only_when_every_serving_region_is() -> None:
    w = {"a": 40, "b": 30, "c": 30}
    ev = fleet([region("a", 40, probe=dead()), loaded("b", 30, w, 90), loaded("c", 20, w, 90)], w)
    assert tick_of(ev, CFG, at(10), remembered(a=DOWN)).receivers({"a"}) == ["b", "c"]
    mixed = fleet([region("a", 40, probe=dead()), loaded("b", 30, w, 90), loaded("c", 20, w, 30)], w)
    assert tick_of(mixed, CFG, at(10), remembered(a=DOWN)).receivers({"a"}) == ["c"]


def test_a_saturated_region_with_no_share_is_no_fleet_wide_overload() -> None:
    # b carries no share: nothing is serving once a is set aside, so nothing is evened out onto b.
    ev = fleet(
        [
            region("a", 50, probe=dead()),
            region("b", 50, capacity=capacity(ready=1, per_replica=1.0, load=5.0)),
        ],
        {"a": 100, "b": 0},
    )
    tick = tick_of(ev, CFG, at(10), remembered(a=DOWN))
    assert tick.verdicts["b"] is Verdict.SATURATED
    assert tick.receivers({"a"}) == []


@pytest.mark.parametrize(("since", "turning"), [(-19.5, True), (-20.0, False), (-20.5, False)])
def test_turning_within_the_window(since: float, turning: bool) -> None:
    mem = remembered(b={"last_direction": -1, "last_direction_change_at": at(since)})
    tick = tick_of(fleet([region("a", 50), region("b", 50)]), CFG, at(10), mem)
    assert tick.turning("b", +1) is turning
    assert tick.turning("b", -1) is False
    assert (tick.receivers(set()) == ["a"]) is turning
    assert tick.receivers(set(), stable=False) == ["a", "b"]


def test_never_moved_is_never_turning() -> None:
    tick = tick_of(
        fleet([region("a", 50), region("b", 50)]), CFG, at(10), remembered(b={"last_direction": 1})
    )
    assert tick.turning("b", -1) is False


@pytest.mark.parametrize(
    ("amount", "words"), [(40, "by headroom"), (41, "past their headroom (40), evenly by capacity")]
)
def test_how(amount: int, words: str) -> None:
    # 0.4 load a point: b and c have 60 points each of usable capacity, at 40 and 40.
    w = {"a": 20, "b": 40, "c": 40}
    ev = fleet([loaded("a", 20, w, 40), loaded("b", 40, w, 40), loaded("c", 40, w, 40)], w)
    assert tick_of(ev, CFG, at(0)).how(amount, ["b", "c"]) == words


def test_loads_read_while_the_weights_changed_give_no_points_of_their_own() -> None:
    # 0.4 load a point (40 over weights 50/50): a's two replicas, usable 24, carry 60 points.
    w = {"a": 50, "b": 50}
    steady = fleet([loaded("a", 50, w, 40), loaded("b", 50, w, 40)], w)
    assert tick_of(steady, CFG, at(10)).points == {"a": 60.0, "b": 60.0}
    # The same loads read across a change (a tier restart, a write landing) mix two weightings:
    # the last steady tick's load per point stands in, and with none remembered nothing is known.
    mixed = steady.model_copy(update={"loads_steady": False})
    assert tick_of(mixed, CFG, at(10)).points == {}
    mem = DecisionMemory(load_per_point=0.3)
    assert tick_of(mixed, CFG, at(10), mem).points == {"a": 80.0, "b": 80.0}
    assert tick_of(steady, CFG, at(10), mem).points == {"a": 60.0, "b": 60.0}
