"""decide: the incidents of issue 26 tick by tick, and what decide keeps in memory."""

from __future__ import annotations

from typing import Any

import pytest

from drctl.decision import DecisionConfig, DecisionMemory, FleetEvidence, Verdict, decide, note_apply_failed
from tests.decision.facts import (
    W3,
    at,
    checked,
    dead,
    fleet,
    loaded,
    passive,
    probe,
    region,
    remembered,
    run,
    three_regions,
)

CFG = DecisionConfig(interval_s=10, failure_threshold=3, recovery_threshold=3, return_stable_s=30)


def test_three_regions_a_lost_replica_then_a_dead_region() -> None:
    """The issue's case: 50/30/20 with two replicas each under 40 streams; us-west-1 loses one of its
    two replicas, then us-east-1 dies. Its share must not all go to the region with one replica."""

    steps = run(CFG, three_regions, 8, dict(W3))
    actions = [d.action for _, d in steps]
    assert actions[:3] == ["hold", "hold", "shed"]  # the breach window (2 s) passes by the next tick
    # 0.4 load a point; us-west-1 keeps 30 points (12 usable), 20 shed by headroom 30:40.
    assert steps[2][1].weights_after == {"us-west-1": 30, "us-east-1": 39, "eu-west-1": 31}
    down = next(d for _, d in steps if d.verdicts["us-east-1"] is Verdict.DOWN)
    assert down.action == "failover"
    assert down.weights_after != {"us-west-1": 72, "us-east-1": 0, "eu-west-1": 28}
    # us-west-1 is full; eu-west-1 takes what it can, and the rest evens out by capacity 12:24.
    assert down.weights_after == {"us-west-1": 33, "us-east-1": 0, "eu-west-1": 67}


def test_cascade_failover_then_failback_meets_a_second_fault() -> None:
    """us-west-1 dies and fails over; it comes back, the failback starts, and us-east-1 dies during
    it. All weight is on us-west-1 in the tick us-east-1 is DOWN, and never on a DOWN region after."""

    def world(i: int, w: dict[str, int]) -> FleetEvidence:
        west = {"probe": dead()} if 1 <= i <= 4 else {}
        east = {"probe": dead()} if i >= 13 else {}
        return fleet([loaded("us-west-1", 60, w, 10, **west), loaded("us-east-1", 40, w, 10, **east)], w)

    steps = run(CFG, world, 18, {"us-west-1": 60, "us-east-1": 40})
    by_tick = [(d.action, d.weights_after["us-west-1"]) for _, d in steps]
    assert by_tick[3] == ("failover", 0)
    failback = [i for i, (a, _) in enumerate(by_tick) if a == "failback"]
    assert failback and failback[0] < 13
    east_down = next(i for i, (_, d) in enumerate(steps) if d.verdicts["us-east-1"] is Verdict.DOWN)
    assert steps[east_down][1].weights_after == {"us-west-1": 100, "us-east-1": 0}
    assert all(d.weights_after["us-east-1"] == 0 for _, d in steps[east_down:])


@pytest.mark.parametrize(("relapse", "after_retreat"), [(11, 0), (12, 34)])
def test_cascade_the_failback_retreats_from_a_relapsing_region(relapse: int, after_retreat: int) -> None:
    """The failback's last step onto us-west-1 goes back the tick us-west-1 fails again (steps at
    ticks 10 and 11); the rest leaves when it is DOWN again, two ticks later."""

    def world(i: int, w: dict[str, int]) -> FleetEvidence:
        west = {"probe": dead()} if 1 <= i <= 4 or i >= relapse else {}
        return fleet([loaded("us-west-1", 60, w, 10, **west), loaded("us-east-1", 40, w, 10)], w)

    steps = run(CFG, world, relapse + 3, {"us-west-1": 60, "us-east-1": 40})
    assert [d.rule for _, d in steps[10:relapse]] == ["failback"] * (relapse - 10)
    assert steps[relapse][1].rule == "retreat"
    assert steps[relapse][1].weights_after["us-west-1"] == after_retreat
    assert steps[relapse + 2][1].weights_after == {"us-west-1": 0, "us-east-1": 100}


def test_decide_does_not_mutate_its_inputs() -> None:
    ev = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 60, "b": 40})
    mem = remembered(a={"verdict": Verdict.DOWN, "consecutive_failures": 3, "since": at(0)})
    ev_before, mem_before = ev.model_dump(), mem.model_dump()
    d, new = decide(ev, mem, CFG, at(30))
    assert d.action == "failover"
    assert (ev.model_dump(), mem.model_dump()) == (ev_before, mem_before)
    assert new is not mem and new.regions["a"] is not mem.regions["a"]


def test_memory_after_a_move() -> None:
    ev = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 60, "b": 40})
    mem = remembered(a={"verdict": Verdict.DOWN, "consecutive_failures": 3, "since": at(0)})
    _, new = decide(ev, mem.model_copy(update={"decisions": 4}), CFG, at(30))
    assert new.decisions == 5
    assert new.last_applied == {"a": 0, "b": 100}
    assert (new.regions["a"].last_direction, new.regions["a"].last_direction_change_at) == (-1, at(30))
    assert (new.regions["b"].last_direction, new.regions["b"].last_direction_change_at) == (1, at(30))
    assert new.regions["a"].emptied_by == "failover"
    # The same direction again keeps the time its direction began.
    mem2 = new.model_copy(update={"regions": {**new.regions}})
    ev2 = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 10, "b": 90})
    _, newer = decide(ev2, mem2, CFG, at(40))
    assert newer.regions["a"].last_direction_change_at == at(30)


def test_an_advisory_decision_changes_no_movement_memory() -> None:
    cfg = CFG.model_copy(update={"policy": "manual"})
    ev = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 60, "b": 40})
    mem = remembered(a={"verdict": Verdict.DOWN, "consecutive_failures": 3, "since": at(0)})
    d, new = decide(ev, mem, cfg, at(30))
    assert (d.action, d.advisory) == ("failover", True)
    assert new.last_applied is None
    assert (new.regions["a"].last_direction, new.regions["a"].emptied_by) == (0, None)
    assert new.decisions == 1


def test_a_step_is_forgotten_after_a_healthy_tick() -> None:
    ev = fleet([region("a", 60), region("b", 40)], {"a": 60, "b": 40})
    _, new = decide(ev, remembered(a={"last_step_pct": 20}, b={"last_step_pct": 5}), CFG, at(0))
    assert (new.regions["a"].last_step_pct, new.regions["b"].last_step_pct) == (0, 0)
    sick = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 0, "b": 100})
    _, kept = decide(sick, remembered(a={"last_step_pct": 20}), CFG, at(0))
    assert kept.regions["a"].last_step_pct == 20


def shedding() -> tuple[FleetEvidence, DecisionMemory]:
    w = {"a": 50, "b": 50}
    ev = fleet([loaded("a", 50, w, 40, ready=1), loaded("b", 50, w, 40)], w)
    return ev, remembered(a={"breach_since": at(0)})


@pytest.mark.parametrize(("now", "held"), [(29.5, True), (30.0, False), (30.5, False)])
def test_backoff_after_a_failed_apply(now: float, held: bool) -> None:
    ev, mem = shedding()
    d, _ = checked(ev, note_apply_failed(mem, at(0), 30), CFG, at(now))
    assert (d.action == "hold") is held
    if held:
        assert d.reasons == [f"hold: back-off after a failed apply until {at(30)}; only safety moves"]


def test_backoff_never_holds_a_failover() -> None:
    ev = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 60, "b": 40})
    mem = remembered(a={"verdict": Verdict.DOWN, "consecutive_failures": 3, "since": at(0)})
    d, _ = checked(ev, note_apply_failed(mem, at(0), 30), CFG, at(10))
    assert d.action == "failover"


def test_note_apply_failed_does_not_mutate() -> None:
    mem = DecisionMemory()
    new = note_apply_failed(mem, at(5), 12.5)
    assert (mem.not_before, new.not_before) == (None, at(17.5))


URGENT: list[tuple[str, dict[str, Any], bool]] = [
    ("calm", {}, False),
    ("suspect", {"probe": dead()}, True),
]


@pytest.mark.parametrize(("case", "a", "urgent"), URGENT, ids=[c[0] for c in URGENT])
def test_urgent(case: str, a: dict[str, Any], urgent: bool) -> None:
    d, _ = checked(fleet([region("a", 60, **a), region("b", 40)]), remembered(), CFG, at(0))
    assert d.urgent is urgent


def test_urgent_while_recovering_and_not_once_down_and_drained() -> None:
    ev = fleet([region("a", 60), region("b", 40)], {"a": 0, "b": 100})
    mem = remembered(a={"verdict": Verdict.DOWN, "consecutive_failures": 3, "since": at(0)})
    d, _ = checked(ev, mem, CFG, at(10))
    assert (d.verdicts["a"], d.urgent) == (Verdict.RECOVERING, True)
    down = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 0, "b": 100})
    d, _ = checked(down, mem, CFG, at(10))
    assert (d.action, d.urgent) == ("hold", False)


def test_the_decision_names_its_figures() -> None:
    w = {"a": 50, "b": 50}
    ev = fleet(
        [
            loaded("a", 50, w, 40, passive=passive(ttft_p99_ms=90.0)),
            region("b", 50, probe=probe(), capacity=None),
        ],
        w,
    )
    d, _ = checked(ev, remembered(), CFG, at(0))
    assert d.evidence["a"] == {
        "verdict": "HEALTHY",
        "why": "answers; 0/2 ready replicas failing",
        "weight_before": 50,
        "weight_after": 50,
        "home_weight": 50,
        "usable_points": 60.0,
        "ready": 2,
        "loading": 0,
        "desired": 2,
        "load": 20.0,
    }
    assert set(d.evidence["b"]) == {"verdict", "why", "weight_before", "weight_after", "home_weight"}
    assert (d.rule, d.reasons, d.superseded, d.moves) == ("hold", ["hold: nothing to move"], [], False)


def test_home_weights_all_zero_share_equally() -> None:
    ev = fleet([region("a", 0), region("b", 0)], {"a": 0, "b": 0}, weights_applied=None)
    d, _ = checked(ev, remembered(), CFG, at(0))
    assert d.weights_after == {"a": 50, "b": 50}


def test_a_shed_region_gets_its_share_back_only_after_the_stability_window() -> None:
    """us-west-1 loses a replica for one tick: the shed goes at once, the return waits out the
    window (30 s from the turn) even though return_stable_s alone would allow it sooner."""
    cfg = CFG.model_copy(update={"return_stable_s": 0.0, "stability_window_s": 30.0, "breach_window_s": 0.0})

    def world(i: int, w: dict[str, int]) -> FleetEvidence:
        return fleet(
            [loaded("us-west-1", 60, w, 30, ready=1 if i == 1 else 2), loaded("us-east-1", 40, w, 30)], w
        )

    steps = run(cfg, world, 8, {"us-west-1": 60, "us-east-1": 40})
    rules = [d.rule for _, d in steps]
    assert rules[1] == "shed"
    returned = rules.index("return")
    assert returned == 4  # the shed at 10 s, the turn back at 40 s: not at 20 s or 30 s
    assert any("within the stability window" in r for _, d in steps[2:4] for r in d.reasons)


def test_five_regions_a_dead_one_goes_to_every_survivor_by_headroom() -> None:
    w = {"r1": 20, "r2": 20, "r3": 20, "r4": 20, "r5": 20}
    ready = {"r1": 2, "r2": 2, "r3": 3, "r4": 4, "r5": 1}

    def world(i: int, weights: dict[str, int]) -> FleetEvidence:
        regions = [
            loaded(r, 20, weights, 50, ready=ready[r], **({"probe": dead()} if r == "r1" and i >= 1 else {}))
            for r in w
        ]
        return fleet(regions, weights)

    steps = run(CFG, world, 4, dict(w))
    d = steps[3][1]
    assert d.action == "failover"
    # 0.5 load a point: usable 12 a replica is 24 points; rooms r2 28, r3 52, r4 76, r5 4 (of 160):
    # 20 points give 3.5, 6.5, 9.5 and 0.5; the halves round to the larger shares first.
    assert d.weights_after == {"r1": 0, "r2": 23, "r3": 27, "r4": 30, "r5": 20}


def test_the_load_per_point_is_remembered_from_steady_loads_only() -> None:
    w = {"a": 50, "b": 50}
    steady = fleet([loaded("a", 50, w, 40), loaded("b", 50, w, 40)], w)
    _, mem = decide(steady, DecisionMemory(), CFG, at(10))
    assert mem.load_per_point == pytest.approx(0.4)
    # Loads read while the weights changed: the steady figure is kept, not replaced by theirs.
    doubled = fleet([loaded("a", 50, w, 80), loaded("b", 50, w, 80)], w, loads_steady=False)
    d, again = decide(doubled, mem, CFG, at(20))
    assert again.load_per_point == pytest.approx(0.4)
    assert d.evidence["a"]["usable_points"] == pytest.approx(60.0)
