"""Rules `failback` and `return`: share comes back in steps to a region HEALTHY for long enough."""

from __future__ import annotations

import pytest

from drctl.decision import DecisionConfig
from drctl.decision.rules.returning import returning
from tests.decision.facts import at, capacity, fleet, region, remembered, tick_of

CFG = DecisionConfig(
    interval_s=10, return_stable_s=30, return_step_pct=34, min_step_pct=5, stability_window_s=30
)


def two(a: int = 0, a_cap=None):  # type: ignore[no-untyped-def]
    caps = {"capacity": a_cap} if a_cap is not None else {"capacity": capacity(per_replica=None)}
    return fleet(
        [region("a", 60, **caps), region("b", 40, capacity=capacity(per_replica=None))],
        {"a": a, "b": 100 - a},
    )


def stable(by: str = "failover", since: float = 0.0, **kw: object) -> dict[str, object]:
    return {"emptied_by": by, "since": at(since), **kw}


def test_failback_steps_toward_home() -> None:
    out = returning(tick_of(two(), CFG, at(30), remembered(a=stable())), [])
    assert out is not None
    assert (out.rule, out.action, out.advisory, out.urgent) == ("failback", "failback", False, True)
    assert out.weights == {"a": 34, "b": 66}
    assert out.region_updates == {"a": {"last_step_pct": 34, "emptied_by": "failover"}}
    assert out.reasons == ["failback: a +34 (HEALTHY for 30 s or more): a 34 / b 66"]


def test_the_last_step_reaches_home_and_clears_the_mark() -> None:
    out = returning(tick_of(two(a=34), CFG, at(40), remembered(a=stable())), [])
    assert out is not None
    assert out.weights == {"a": 60, "b": 40}
    assert out.region_updates == {"a": {"last_step_pct": 26, "emptied_by": None}}


@pytest.mark.parametrize(("since", "fires"), [(0.0, True), (0.5, False), (-0.5, True)])
def test_return_stable_boundary(since: float, fires: bool) -> None:
    notes: list[str] = []
    out = returning(tick_of(two(), CFG, at(30), remembered(a=stable(since=since))), notes)
    assert (out is not None) is fires
    assert (notes == ["return: a HEALTHY for less than 30 s"]) is not fires


def test_a_region_never_judged_before_is_not_stable() -> None:
    # No memory: its HEALTHY verdict begins now.
    assert returning(tick_of(two(), CFG, at(30)), []) is None


def test_return_after_a_shed_follows_the_mode() -> None:
    mem = remembered(a=stable(by="shed"))
    out = returning(tick_of(two(), CFG, at(30), mem), [])
    assert out is not None and (out.action, out.advisory) == ("return", False)
    advise = returning(tick_of(two(), CFG.model_copy(update={"mode": "advise"}), at(30), mem), [])
    assert (
        advise is not None
        and advise.advisory is True
        and advise.reasons[0].endswith("(advised, not applied)")
    )
    assert returning(tick_of(two(), CFG.model_copy(update={"mode": "off"}), at(30), mem), []) is None


def test_failback_follows_the_policy() -> None:
    mem = remembered(a=stable())
    off = returning(tick_of(two(), CFG.model_copy(update={"mode": "off"}), at(30), mem), [])
    assert off is not None and off.advisory is False
    manual = returning(tick_of(two(), CFG.model_copy(update={"policy": "manual"}), at(30), mem), [])
    assert manual is not None and manual.advisory is True


@pytest.mark.parametrize(("a", "step"), [(56, 4), (55, 5), (50, 10)])
def test_min_step_unless_it_finishes(a: int, step: int) -> None:
    out = returning(tick_of(two(a=a), CFG, at(30), remembered(a=stable())), [])
    assert out is not None and out.weights["a"] == a + step


def test_a_step_under_the_minimum_is_not_made() -> None:
    cap = capacity(ready=2, per_replica=10.0, load=4.0)  # usable 16
    ev = fleet(
        [region("a", 60, capacity=cap), region("b", 40, capacity=capacity(per_replica=None, load=30.0))],
        {"a": 10, "b": 90},
    )
    # 34 load on 100 points: 0.34 a point; a's usable 16 is 47 points: room 37, the step stays 34.
    out = returning(tick_of(ev, CFG, at(30), remembered(a=stable())), [])
    assert out is not None and out.weights["a"] == 44
    tight = fleet(
        [region("a", 60, capacity=capacity(ready=1, per_replica=5.0, load=4.0)), ev.regions["b"]],
        {"a": 10, "b": 90},
    )
    # a's usable 4 is 11.8 points: room 1, under the minimum.
    assert returning(tick_of(tight, CFG, at(30), remembered(a=stable())), []) is None


def test_not_while_turning_within_the_stability_window() -> None:
    notes: list[str] = []
    mem = remembered(a=stable(last_direction=-1, last_direction_change_at=at(5)))
    assert returning(tick_of(two(), CFG, at(30), mem), notes) is None
    assert notes == ["return: a shed within the stability window (30 s)"]
    assert returning(tick_of(two(), CFG, at(35), mem), []) is not None


def test_donor_turning_within_the_window_does_not_give() -> None:
    mem = remembered(a=stable(), b={"last_direction": 1, "last_direction_change_at": at(5), "since": at(0)})
    assert returning(tick_of(two(), CFG, at(30), mem), []) is None


def test_not_healthy_does_not_return() -> None:
    ev = two()
    ev.regions["a"].probe = None  # UNKNOWN
    assert returning(tick_of(ev, CFG, at(30), remembered(a=stable())), []) is None


def test_at_home_nothing_to_do() -> None:
    assert returning(tick_of(two(a=60), CFG, at(30), remembered(a=stable())), []) is None


def test_three_regions_take_from_those_above_home_by_excess() -> None:
    ev = fleet(
        [region("a", 50, capacity=capacity(per_replica=None)), region("b", 30), region("c", 20)],
        {"a": 0, "b": 60, "c": 40},
    )
    out = returning(tick_of(ev, CFG, at(30), remembered(a=stable())), [])
    assert out is not None
    # 34 back from b (30 over home) and c (20 over): 3:2.
    assert out.weights == {"a": 34, "b": 40, "c": 26}


def test_a_donor_in_its_window_gives_nothing_and_the_others_only_their_excess() -> None:
    ev = fleet(
        [region("a", 50, capacity=capacity(per_replica=None)), region("b", 30), region("c", 20)],
        {"a": 0, "b": 70, "c": 30},
    )
    mem = remembered(a=stable(), b={"last_direction": 1, "last_direction_change_at": at(10), "since": at(0)})
    out = returning(tick_of(ev, CFG, at(30), mem), [])
    assert out is not None
    assert out.weights == {"a": 10, "b": 70, "c": 20}
    assert out.region_updates["a"]["last_step_pct"] == 10


def test_two_regions_return_at_once() -> None:
    ev = fleet(
        [
            region("a", 40, capacity=capacity(per_replica=None)),
            region("b", 40, capacity=capacity(per_replica=None)),
            region("c", 20),
        ],
        {"a": 30, "b": 20, "c": 50},
    )
    out = returning(tick_of(ev, CFG, at(30), remembered(a=stable(by="shed"), b=stable(by="shed"))), [])
    assert out is not None
    # Deficits 10 and 20 (steps 10 and 20), c's excess 30 covers both.
    assert (out.action, out.weights) == ("return", {"a": 40, "b": 40, "c": 20})


@pytest.mark.parametrize(("step_pct", "fires"), [(5, True), (4, False)])
def test_a_step_at_the_minimum_is_made(step_pct: int, fires: bool) -> None:
    cfg = CFG.model_copy(update={"return_step_pct": step_pct})
    out = returning(tick_of(two(), cfg, at(30), remembered(a=stable())), [])
    assert (out is not None) is fires
    if out is not None:
        assert out.weights == {"a": 5, "b": 95}
