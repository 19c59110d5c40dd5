"""invariants.py: each check passes a sound decision and catches a hand-made harmful one."""

from __future__ import annotations

from typing import Any

import pytest

from drctl.decision import Decision, DecisionConfig, FleetEvidence, Verdict
from drctl.decision.invariants import (
    Violation,
    check_decision,
    check_trace,
    down_drained_within_rto,
    no_flapping,
    no_share_onto_unsafe,
    retreat_within_one_tick,
    weights_sum_100,
    within_capacity_while_headroom,
)
from tests.decision.facts import at, fleet, loaded, region

CFG = DecisionConfig(interval_s=10, rto_target_s=30, stability_window_s=30)
H, D, S, G, R, U = (
    Verdict.HEALTHY,
    Verdict.DOWN,
    Verdict.SATURATED,
    Verdict.DEGRADED,
    Verdict.RECOVERING,
    Verdict.UNKNOWN,
)


def decision(
    before: dict[str, int], after: dict[str, int], verdicts: dict[str, Verdict], **kw: Any
) -> Decision:
    base: dict[str, Any] = {"action": "shed", "rule": "shed"}
    return Decision(weights_before=before, weights_after=after, verdicts=verdicts, **{**base, **kw})


EV = fleet([region("a", 50), region("b", 30), region("c", 20)], {"a": 50, "b": 30, "c": 20})


def names(found: list[Violation]) -> list[str]:
    return [v.name for v in found]


UNSAFE = [
    ("onto healthy", {"a": H, "b": H, "c": H}, []),
    ("onto degraded", {"a": H, "b": G, "c": H}, ["no_share_onto_unsafe"]),
    ("onto recovering", {"a": H, "b": R, "c": H}, ["no_share_onto_unsafe"]),
    ("onto unknown", {"a": H, "b": U, "c": H}, ["no_share_onto_unsafe"]),
    ("onto down", {"a": H, "b": D, "c": H}, ["no_share_onto_unsafe"]),
    ("onto saturated while c is healthy", {"a": S, "b": S, "c": H}, ["no_share_onto_unsafe"]),
    ("onto saturated, the whole fleet is", {"a": S, "b": S, "c": S}, []),
    ("onto saturated, the rest is down", {"a": D, "b": S, "c": S}, []),
    ("onto saturated, the donor recovering", {"a": R, "b": S, "c": S}, []),
]


@pytest.mark.parametrize(("case", "verdicts", "want"), UNSAFE, ids=[c[0] for c in UNSAFE])
def test_no_share_onto_unsafe(case: str, verdicts: dict[str, Verdict], want: list[str]) -> None:
    d = decision({"a": 50, "b": 30, "c": 20}, {"a": 40, "b": 40, "c": 20}, verdicts)
    assert names(no_share_onto_unsafe(EV, d, CFG)) == want


def test_unsafe_region_keeping_or_losing_share_is_fine() -> None:
    d = decision({"a": 50, "b": 30, "c": 20}, {"a": 50, "b": 20, "c": 30}, {"a": G, "b": D, "c": H})
    assert no_share_onto_unsafe(EV, d, CFG) == []


SUMS = [
    ("sound", {"a": 50, "b": 30, "c": 20}, []),
    ("99", {"a": 50, "b": 30, "c": 19}, ["weights_sum_100"]),
    ("101", {"a": 51, "b": 30, "c": 20}, ["weights_sum_100"]),
    ("a region missing", {"a": 70, "b": 30}, ["weights_sum_100"]),
    ("an unknown region", {"a": 50, "b": 30, "c": 20, "d": 0}, ["weights_sum_100"]),
    ("negative", {"a": 60, "b": 50, "c": -10}, ["weights_sum_100"]),
    ("all zero", {"a": 0, "b": 0, "c": 0}, ["weights_sum_100"]),
]


@pytest.mark.parametrize(("case", "after", "want"), SUMS, ids=[c[0] for c in SUMS])
def test_weights_sum_100(case: str, after: dict[str, int], want: list[str]) -> None:
    d = decision({"a": 50, "b": 30, "c": 20}, after, {"a": H, "b": H, "c": H})
    assert names(weights_sum_100(EV, d, CFG)) == want


def capacity_world() -> FleetEvidence:
    # 0.4 load a point; usable (12 a replica): a 1 replica = 30 points, b and c 2 = 60 points.
    w = {"a": 30, "b": 40, "c": 30}
    return fleet([loaded("a", 50, w, 40, ready=1), loaded("b", 30, w, 40), loaded("c", 20, w, 40)], w)


CAPACITY = [
    ("within", {"a": 30, "b": 40, "c": 30}, {"a": 30, "b": 50, "c": 20}, {}, []),
    ("a one point over (rounding)", {"a": 25, "b": 45, "c": 30}, {"a": 31, "b": 39, "c": 30}, {}, []),
    (
        "a two over while b has room",
        {"a": 25, "b": 45, "c": 30},
        {"a": 32, "b": 38, "c": 30},
        {},
        ["within_capacity_while_headroom"],
    ),
    (
        "a over, nobody else has room",
        {"a": 25, "b": 45, "c": 30},
        {"a": 40, "b": 30, "c": 30},
        {"b": S, "c": S},
        [],
    ),
    (
        "a over, b has room but is degraded",
        {"a": 25, "b": 45, "c": 30},
        {"a": 40, "b": 30, "c": 30},
        {"c": S, "b": G},
        [],
    ),
    ("b is at its capacity less one", {"a": 25, "b": 45, "c": 30}, {"a": 40, "b": 59, "c": 1}, {"c": D}, []),
    (
        "b is at its capacity less two",
        {"a": 25, "b": 45, "c": 30},
        {"a": 42, "b": 58, "c": 0},
        {"c": D},
        ["within_capacity_while_headroom"],
    ),
]


@pytest.mark.parametrize(
    ("case", "before", "after", "verdicts", "want"), CAPACITY, ids=[c[0] for c in CAPACITY]
)
def test_within_capacity_while_headroom(
    case: str, before: dict[str, int], after: dict[str, int], verdicts: dict[str, Verdict], want: list[str]
) -> None:
    d = decision(before, after, {"a": H, "b": H, "c": H, **verdicts})
    assert names(within_capacity_while_headroom(capacity_world(), d, CFG)) == want


def test_check_decision_runs_every_per_decision_check() -> None:
    d = decision({"a": 25, "b": 50, "c": 25}, {"a": 42, "b": 38, "c": 26}, {"a": H, "b": H, "c": G})
    assert sorted(set(names(check_decision(capacity_world(), d, CFG)))) == [
        "no_share_onto_unsafe",
        "weights_sum_100",
        "within_capacity_while_headroom",
    ]


TWO = fleet([region("a", 60), region("b", 40)])


def step(t: float, before: dict[str, int], after: dict[str, int], verdicts: dict[str, Verdict], **kw: Any):  # type: ignore[no-untyped-def]
    return (TWO.model_copy(update={"at": at(t)}), decision(before, after, verdicts, **kw))


FAILBACK = {"action": "failback", "rule": "failback"}


def test_retreat_within_one_tick() -> None:
    stepped = step(0, {"a": 0, "b": 100}, {"a": 34, "b": 66}, {"a": H, "b": H}, **FAILBACK)
    kept = step(10, {"a": 34, "b": 66}, {"a": 34, "b": 66}, {"a": G, "b": H}, action="hold", rule="hold")
    assert names(retreat_within_one_tick([stepped, kept], CFG)) == ["retreat_within_one_tick"]
    back = step(
        10, {"a": 34, "b": 66}, {"a": 0, "b": 100}, {"a": G, "b": H}, action="failback", rule="retreat"
    )
    assert retreat_within_one_tick([stepped, back], CFG) == []
    healthy = step(10, {"a": 34, "b": 66}, {"a": 34, "b": 66}, {"a": H, "b": H}, action="hold", rule="hold")
    assert retreat_within_one_tick([stepped, healthy], CFG) == []
    nowhere = step(10, {"a": 34, "b": 66}, {"a": 34, "b": 66}, {"a": G, "b": D}, action="hold", rule="hold")
    assert retreat_within_one_tick([stepped, nowhere], CFG) == []
    advised = step(0, {"a": 0, "b": 100}, {"a": 34, "b": 66}, {"a": H, "b": H}, advisory=True, **FAILBACK)
    assert retreat_within_one_tick([advised, kept], CFG) == []
    shed = step(0, {"a": 0, "b": 100}, {"a": 34, "b": 66}, {"a": H, "b": H})
    assert retreat_within_one_tick([shed, kept], CFG) == []
    # A retreat is the reversal, not a step: b, given its share back by it, may fail next without blame
    # here (the failover rule answers a DOWN region); a forward return step onto b would be held to it.
    retreated = step(
        10, {"a": 34, "b": 66}, {"a": 0, "b": 100}, {"a": G, "b": H}, action="return", rule="retreat"
    )
    b_fails = step(20, {"a": 0, "b": 100}, {"a": 0, "b": 100}, {"a": H, "b": G}, action="hold", rule="hold")
    assert retreat_within_one_tick([retreated, b_fails], CFG) == []
    stepped_b = step(
        10, {"a": 34, "b": 66}, {"a": 0, "b": 100}, {"a": H, "b": H}, action="return", rule="return"
    )
    assert names(retreat_within_one_tick([stepped_b, b_fails], CFG)) == ["retreat_within_one_tick"]


def down_for(seconds: list[float], weight_a: int, **kw: Any) -> list[Any]:
    return [
        step(
            t,
            {"a": weight_a, "b": 100 - weight_a},
            {"a": weight_a, "b": 100 - weight_a},
            {"a": D, "b": H},
            **kw,
        )
        for t in seconds
    ]


def test_down_drained_within_rto() -> None:
    assert down_drained_within_rto(down_for([0, 10, 20, 30], 60), CFG) == []
    late = down_drained_within_rto(down_for([0, 10, 20, 30, 30.5], 60), CFG)
    assert names(late) == ["down_drained_within_rto"]
    assert down_drained_within_rto(down_for([0, 40], 0), CFG) == []
    manual = CFG.model_copy(update={"policy": "manual"})
    assert down_drained_within_rto(down_for([0, 40], 60), manual) == []
    nobody = [step(t, {"a": 60, "b": 40}, {"a": 60, "b": 40}, {"a": D, "b": D}) for t in (0, 40)]
    assert down_drained_within_rto(nobody, CFG) == []
    saturated = [step(t, {"a": 60, "b": 40}, {"a": 60, "b": 40}, {"a": D, "b": S}) for t in (0, 40)]
    assert names(down_drained_within_rto(saturated, CFG)) == ["down_drained_within_rto"]


def test_down_clock_restarts_when_the_region_is_not_down() -> None:
    steps = down_for([0, 10], 60) + [step(20, {"a": 60, "b": 40}, {"a": 60, "b": 40}, {"a": R, "b": H})]
    steps += down_for([30, 40, 50], 60)
    assert down_drained_within_rto(steps, CFG) == []


def moves(times_and_a: list[tuple[float, int]], rule: str = "shed") -> list[Any]:
    out, prev = [], 60
    for t, a in times_and_a:
        out.append(step(t, {"a": prev, "b": 100 - prev}, {"a": a, "b": 100 - a}, {"a": H, "b": H}, rule=rule))
        prev = a
    return out


def test_no_flapping() -> None:
    assert no_flapping(moves([(0, 40), (10, 30), (20, 30)]), CFG) == []
    quick = no_flapping(moves([(0, 40), (29.5, 50)]), CFG)
    assert names(quick) == ["no_flapping", "no_flapping"]  # a up and b down, both turned
    assert no_flapping(moves([(0, 40), (30, 50)]), CFG) == []
    assert no_flapping(moves([(0, 40), (10, 50)], rule="failover"), CFG) == []
    assert no_flapping(moves([(0, 40), (10, 50)], rule="retreat"), CFG) == []
    assert no_flapping(moves([(0, 40), (10, 50)], rule="reconcile"), CFG) == []


def test_no_flapping_counts_from_the_turn_not_the_last_move() -> None:
    # Down at 0, down again at 25, up at 35: 35 s after the turn at 0, though 10 s after a move.
    assert no_flapping(moves([(0, 50), (25, 40), (35, 50)]), CFG) == []
    # Up at 35 turned; down again at 40 is a turn 5 s later.
    assert names(no_flapping(moves([(0, 50), (25, 40), (35, 50), (40, 45)]), CFG))[:1] == ["no_flapping"]


def test_no_flapping_follows_applied_targets_and_skips_advice() -> None:
    first = step(0, {"a": 60, "b": 40}, {"a": 40, "b": 60}, {"a": H, "b": H})
    advised = step(5, {"a": 40, "b": 60}, {"a": 60, "b": 40}, {"a": H, "b": H}, advisory=True)
    # The tier was hand-edited to 30/70 before this tick: a move from the last target, 40 -> 40, is none.
    held = step(10, {"a": 30, "b": 70}, {"a": 40, "b": 60}, {"a": H, "b": H})
    assert no_flapping([first, advised, held], CFG) == []


def test_check_trace_runs_every_check() -> None:
    bad_sum = step(50, {"a": 60, "b": 40}, {"a": 60, "b": 41}, {"a": H, "b": H})
    late = down_for([0, 40], 60)
    found = set(names(check_trace([*late, bad_sum], CFG)))
    assert found == {"weights_sum_100", "down_drained_within_rto"}
    assert check_trace([], CFG) == []


def test_from_all_zero_weights() -> None:
    zero = {"a": 0, "b": 0, "c": 0}
    onto_unknown = decision(zero, {"a": 50, "b": 30, "c": 20}, {"a": U, "b": U, "c": U})
    assert no_share_onto_unsafe(EV, onto_unknown, CFG) == []
    past_healthy = decision(zero, {"a": 50, "b": 30, "c": 20}, {"a": U, "b": U, "c": H})
    assert names(no_share_onto_unsafe(EV, past_healthy, CFG)) == ["no_share_onto_unsafe"] * 2


@pytest.mark.parametrize(
    ("before", "after", "flagged"),
    [
        ({"a": 0, "b": 1, "c": 0}, {"a": 0, "b": 100, "c": 0}, []),
        ({"a": 1, "b": 2, "c": 0}, {"a": 33, "b": 67, "c": 0}, []),
        ({"a": 2, "b": 1, "c": 0}, {"a": 66, "b": 34, "c": 0}, []),
        ({"a": 2, "b": 1, "c": 0}, {"a": 65, "b": 35, "c": 0}, ["b"]),
        ({"a": 50, "b": 40, "c": 0}, {"a": 45, "b": 55, "c": 0}, ["b"]),
    ],
)
def test_weights_not_summing_to_100_compare_as_shares(
    before: dict[str, int], after: dict[str, int], flagged: list[str]
) -> None:
    d = decision(before, after, {"a": H, "b": U, "c": H})
    assert [v.detail.split()[0] for v in no_share_onto_unsafe(EV, d, CFG)] == flagged


def test_retreat_is_not_asked_of_an_advised_decision() -> None:
    stepped = step(0, {"a": 0, "b": 100}, {"a": 34, "b": 66}, {"a": H, "b": H}, **FAILBACK)
    advised = step(
        10,
        {"a": 34, "b": 66},
        {"a": 34, "b": 66},
        {"a": D, "b": H},
        action="failover",
        rule="failover",
        advisory=True,
    )
    assert retreat_within_one_tick([stepped, advised], CFG) == []
    applied = step(10, {"a": 34, "b": 66}, {"a": 34, "b": 66}, {"a": D, "b": H}, action="hold", rule="hold")
    assert names(retreat_within_one_tick([stepped, applied], CFG)) == ["retreat_within_one_tick"]


def test_capacity_is_not_judged_on_loads_read_while_the_weights_changed() -> None:
    d = decision({"a": 25, "b": 45, "c": 30}, {"a": 32, "b": 38, "c": 30}, {"a": H, "b": H, "c": H})
    mixed = capacity_world().model_copy(update={"loads_steady": False})
    assert names(within_capacity_while_headroom(capacity_world(), d, CFG)) == [
        "within_capacity_while_headroom"
    ]
    assert within_capacity_while_headroom(mixed, d, CFG) == []
