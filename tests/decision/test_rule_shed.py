"""Rule `shed`: a region over its usable capacity for the breach window sheds its excess."""

from __future__ import annotations

from datetime import timedelta

import pytest

from drctl.decision import DecisionConfig, DecisionMemory
from drctl.decision.rules.shed import shed
from tests.decision.facts import at, capacity, fleet, loaded, passive, probe, region, remembered, tick_of

CFG = DecisionConfig(interval_s=10, breach_window_s=10, shed_step_interval_s=20, min_step_pct=5)
W = {"a": 50, "b": 30, "c": 20}


def world(a_ready: int = 1, total: float = 40.0, weights: dict[str, int] | None = None, **kw):  # type: ignore[no-untyped-def]
    w = weights or W
    return fleet(
        [loaded("a", 50, w, total, ready=a_ready), loaded("b", 30, w, total), loaded("c", 20, w, total)],
        w,
        **kw,
    )


def breached(since: float = 0.0, **extra: object) -> DecisionMemory:
    return remembered(a={"breach_since": at(since), **extra})


def test_sheds_the_excess_to_headroom() -> None:
    # 0.4 load a point; a: usable 12 = 30 points, 20 over; b room 60-30, c room 60-20: 30:40.
    out = shed(tick_of(world(), CFG, at(10), breached()), [])
    assert out is not None
    assert (out.rule, out.action, out.urgent, out.advisory) == ("shed", "shed", True, False)
    assert out.weights == {"a": 30, "b": 39, "c": 31}
    assert out.fleet_updates == {"next_shed_at": at(30)}
    assert out.region_updates == {"a": {"emptied_by": "shed", "last_step_pct": 0}}


@pytest.mark.parametrize(("since", "fires"), [(0.0, True), (0.5, False), (-0.5, True)])
def test_breach_window_boundary(since: float, fires: bool) -> None:
    assert (shed(tick_of(world(), CFG, at(10), breached(since)), []) is not None) is fires


def test_no_breach_memory_does_not_fire() -> None:
    assert shed(tick_of(world(), CFG, at(10)), []) is None


@pytest.mark.parametrize(("next_at", "fires"), [(10.0, True), (10.5, False), (9.5, True)])
def test_shed_spacing_boundary(next_at: float, fires: bool) -> None:
    mem = breached().model_copy(update={"next_shed_at": at(next_at)})
    notes: list[str] = []
    assert (shed(tick_of(world(), CFG, at(10), mem), notes) is not None) is fires
    assert bool(notes) is not fires


def test_mode_off_and_advise() -> None:
    assert shed(tick_of(world(), CFG.model_copy(update={"mode": "off"}), at(10), breached()), []) is None
    out = shed(tick_of(world(), CFG.model_copy(update={"mode": "advise"}), at(10), breached()), [])
    assert out is not None and out.advisory is True and out.reasons[0].endswith("(advise: not applied)")


@pytest.mark.parametrize(("a_weight", "fires"), [(35, True), (34, False)])
def test_min_step_boundary(a_weight: int, fires: bool) -> None:
    # a carries 30 points within capacity: 35 is 5 over (the minimum), 34 is 4.
    w = {"a": a_weight, "b": 100 - a_weight - 20, "c": 20}
    ev = world(weights=w)
    notes: list[str] = []
    out = shed(tick_of(ev, CFG, at(10), breached()), notes)
    assert (out is not None) is fires
    assert bool(notes) is not fires


def test_stability_window_holds_a_region_that_just_rose() -> None:
    mem = breached(last_direction=1, last_direction_change_at=at(-10))
    notes: list[str] = []
    cfg = CFG.model_copy(update={"stability_window_s": 30})
    assert shed(tick_of(world(), cfg, at(10), mem), notes) is None
    assert "within the stability window" in notes[0]
    later = shed(tick_of(world(), cfg, at(20), mem), [])
    assert later is not None


def test_no_receiver_with_room_holds_with_a_note() -> None:
    # 0.6 load a point: a over (20 points on one replica), b over too but not yet for the window,
    # c exactly at its usable 20 points: HEALTHY, and no room.
    regions = [
        loaded("a", 50, W, 60, ready=1),
        loaded("b", 30, W, 60, ready=1),
        loaded("c", 20, W, 60, ready=1),
    ]
    notes: list[str] = []
    assert shed(tick_of(fleet(regions, W), CFG, at(10), breached()), notes) is None
    assert notes == ["shed: a over capacity, but the move (0.0) is under 5 points or no region can take it"]


def test_fleet_wide_overload_evens_out() -> None:
    # Everyone SATURATED (2 load a point): usable 12 / 24 / 24 are 6 / 12 / 12 points.
    w = {"a": 60, "b": 20, "c": 20}
    ev = fleet([loaded("a", 50, w, 200, ready=1), loaded("b", 30, w, 200), loaded("c", 20, w, 200)], w)
    mem = remembered(a={"breach_since": at(0)}, b={"breach_since": at(0)}, c={"breach_since": at(0)})
    out = shed(tick_of(ev, CFG, at(10), mem), [])
    assert out is not None
    assert out.weights == {"a": 20, "b": 40, "c": 40}


def test_without_capacity_figures_sheds_the_lost_share() -> None:
    regions = [
        region(
            "a",
            50,
            capacity=capacity(ready=1, desired=2, per_replica=None, load=30.0),
            probe=probe(queue_waiting=4.0),
            passive=passive(ttft_p99_ms=900.0),
        ),
        region("b", 50, capacity=capacity(per_replica=None, load=10.0)),
    ]
    ev = fleet(regions, {"a": 50, "b": 50})
    mem = remembered(a={"breach_since": at(0)})
    out = shed(tick_of(ev, CFG, at(10), mem), [])
    assert out is not None
    assert out.weights == {"a": 25, "b": 75}


def test_unknown_excess_is_not_shed() -> None:
    regions = [
        region("a", 50, capacity=None, probe=None),
        region("b", 50, capacity=capacity(per_replica=None, load=10.0)),
    ]
    mem = remembered(a={"breach_since": at(0)})
    assert shed(tick_of(fleet(regions, {"a": 50, "b": 50}), CFG, at(10), mem), []) is None
    zero = [region("a", 50, capacity=capacity(ready=0, desired=0, per_replica=None), probe=None), regions[1]]
    assert shed(tick_of(fleet(zero, {"a": 50, "b": 50}), CFG, at(10), mem), []) is None


def test_spacing_is_measured_from_now() -> None:
    out = shed(tick_of(world(), CFG, at(13), breached()), [])
    assert out is not None and out.fleet_updates["next_shed_at"] == at(13) + timedelta(seconds=20)


def test_loading_replicas_are_not_lost_share() -> None:
    from drctl.decision.rules.shed import _excess

    regions = [
        region(
            "a",
            60,
            capacity=capacity(ready=1, loading=1, desired=3, per_replica=None, load=30.0),
            probe=probe(queue_waiting=4.0),
            passive=passive(ttft_p99_ms=900.0),
        ),
        region("b", 40, capacity=capacity(per_replica=None, load=10.0)),
    ]
    tick = tick_of(fleet(regions, {"a": 60, "b": 40}), CFG, at(10), remembered(a={"breach_since": at(0)}))
    assert _excess(tick, "a") == pytest.approx(20.0)  # 1 of 3 lost, 1 loading: a third of 60
    out = shed(tick, [])
    assert out is not None and out.weights == {"a": 40, "b": 60}
    bare = tick_of(fleet([region("a", 60, capacity=None), regions[1]], {"a": 60, "b": 40}), CFG, at(10))
    assert _excess(bare, "a") is None
