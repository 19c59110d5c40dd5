"""invariants.py: the trace checks' exact findings, past a skipped step or a region that passes."""

from __future__ import annotations

from drctl.decision import Verdict
from drctl.decision.invariants import (
    down_drained_within_rto,
    no_flapping,
    no_share_onto_unsafe,
    retreat_within_one_tick,
    weights_sum_100,
    within_capacity_while_headroom,
)
from tests.decision.facts import at
from tests.decision.test_invariants import CFG, EV, FAILBACK, capacity_world, decision, names, step

H, D, G, S = Verdict.HEALTHY, Verdict.DOWN, Verdict.DEGRADED, Verdict.SATURATED
HOLD = {"action": "hold", "rule": "hold"}


def test_retreat_finding_names_the_region_its_share_and_its_share_before_the_step() -> None:
    stepped = step(0, {"a": 0, "b": 100}, {"a": 34, "b": 66}, {"a": H, "b": H}, **FAILBACK)
    kept = step(10, {"a": 34, "b": 66}, {"a": 34, "b": 66}, {"a": G, "b": H}, **HOLD)
    [found] = retreat_within_one_tick([stepped, kept], CFG)
    assert found.detail == f"at {at(10)}: a is DEGRADED and keeps 34 (was 0 before the step)"


def test_retreat_is_checked_past_an_advised_step() -> None:
    advised = step(0, {"a": 0, "b": 100}, {"a": 34, "b": 66}, {"a": H, "b": H}, advisory=True, **FAILBACK)
    stepped = step(10, {"a": 0, "b": 100}, {"a": 34, "b": 66}, {"a": H, "b": H}, **FAILBACK)
    kept = step(20, {"a": 34, "b": 66}, {"a": 34, "b": 66}, {"a": G, "b": H}, **HOLD)
    assert names(retreat_within_one_tick([advised, stepped, kept], CFG)) == ["retreat_within_one_tick"]


def test_retreat_checks_every_gainer_past_a_healthy_one() -> None:
    # a and b both gained in the step; a stays HEALTHY, b fails and keeps its gain while c could take it.
    before, after = {"a": 0, "b": 0, "c": 100}, {"a": 20, "b": 20, "c": 60}
    stepped = step(0, before, after, {"a": H, "b": H, "c": H}, **FAILBACK)
    kept = step(10, after, after, {"a": H, "b": G, "c": H}, **HOLD)
    [found] = retreat_within_one_tick([stepped, kept], CFG)
    assert found.detail.startswith(f"at {at(10)}: b is DEGRADED and keeps 20")


def test_down_finding_names_the_region_since_when_its_share_and_who_can_serve() -> None:
    steps = [step(t, {"a": 60, "b": 40}, {"a": 60, "b": 40}, {"a": D, "b": H}) for t in (0, 40)]
    [found] = down_drained_within_rto(steps, CFG)
    assert found.detail == f"at {at(40)}: a DOWN since {at(0)} still has 60 while b can serve"


def test_down_checks_every_region_past_one_that_is_not_down() -> None:
    # a (first) is HEALTHY, b is DOWN for 40 s with a single point left.
    steps = [step(t, {"a": 99, "b": 1}, {"a": 99, "b": 1}, {"a": H, "b": D}) for t in (0, 40)]
    [found] = down_drained_within_rto(steps, CFG)
    assert found.detail == f"at {at(40)}: b DOWN since {at(0)} still has 1 while a can serve"


def test_down_finding_lists_every_region_that_can_serve() -> None:
    before = {"a": 50, "b": 25, "c": 25}
    steps = [step(t, before, before, {"a": D, "b": H, "c": H}) for t in (0, 40)]
    [found] = down_drained_within_rto(steps, CFG)
    assert found.detail.endswith("while b, c can serve")


def test_no_flapping_finding_says_when_and_by_which_rule() -> None:
    first = step(0, {"a": 60, "b": 40}, {"a": 59, "b": 41}, {"a": H, "b": H})
    back = step(10, {"a": 59, "b": 41}, {"a": 60, "b": 40}, {"a": H, "b": H})
    found = no_flapping([first, back], CFG)
    # A one-point move is a move: both regions turned.
    assert [v.detail for v in found] == [
        f"at {at(10)}: a turned (shed) 10 s after its last turn, within 30 s",
        f"at {at(10)}: b turned (shed) 10 s after its last turn, within 30 s",
    ]


def test_no_flapping_is_checked_past_an_advised_decision() -> None:
    advised = step(0, {"a": 60, "b": 40}, {"a": 50, "b": 50}, {"a": H, "b": H}, advisory=True)
    first = step(5, {"a": 60, "b": 40}, {"a": 40, "b": 60}, {"a": H, "b": H})
    back = step(10, {"a": 40, "b": 60}, {"a": 60, "b": 40}, {"a": H, "b": H})
    assert names(no_flapping([advised, first, back], CFG)) == ["no_flapping", "no_flapping"]


def test_no_flapping_checks_every_region_past_one_that_did_not_move() -> None:
    first = step(0, {"a": 50, "b": 30, "c": 20}, {"a": 50, "b": 20, "c": 30}, {"a": H, "b": H, "c": H})
    back = step(10, {"a": 50, "b": 20, "c": 30}, {"a": 50, "b": 30, "c": 20}, {"a": H, "b": H, "c": H})
    found = no_flapping([first, back], CFG)
    assert [v.detail.split(":")[-1].split()[0] for v in found] == ["b", "c"]


def test_no_flapping_a_region_missing_before_started_from_zero() -> None:
    # b has no weight before the first decision: its 1 point is a move up, and the next tick's
    # move down within the window a turn.
    first = step(0, {"a": 100}, {"a": 99, "b": 1}, {"a": H, "b": H})
    back = step(10, {"a": 99, "b": 1}, {"a": 100, "b": 0}, {"a": H, "b": H})
    found = no_flapping([first, back], CFG)
    assert [v.detail for v in found] == [
        f"at {at(10)}: a turned (shed) 10 s after its last turn, within 30 s",
        f"at {at(10)}: b turned (shed) 10 s after its last turn, within 30 s",
    ]


def test_saturated_gainer_when_the_only_other_region_has_no_share_and_is_degraded() -> None:
    # c has no share: it serves nothing, so the fleet that serves (a and b) is SATURATED everywhere.
    d = decision({"a": 50, "b": 50, "c": 0}, {"a": 40, "b": 60, "c": 0}, {"a": S, "b": S, "c": G})
    assert no_share_onto_unsafe(EV, d, CFG) == []


def test_saturated_gainer_while_a_region_with_one_point_is_degraded() -> None:
    # a serves with a single point and is DEGRADED: the fleet is not SATURATED everywhere.
    d = decision({"a": 1, "b": 49, "c": 50}, {"a": 1, "b": 50, "c": 49}, {"a": G, "b": S, "c": S})
    assert [v.detail for v in no_share_onto_unsafe(EV, d, CFG)] == ["b is SATURATED and went 49 -> 50"]


def test_a_region_missing_before_is_compared_from_zero() -> None:
    d = decision({"a": 50, "b": 50}, {"a": 50, "b": 40, "c": 10}, {"a": H, "b": H, "c": H})
    assert no_share_onto_unsafe(EV, d, CFG) == []


def test_weights_sum_100_findings_say_what_is_wrong() -> None:
    verdicts = {"a": H, "b": H, "c": H}
    before = {"a": 50, "b": 30, "c": 20}
    [missing, short] = weights_sum_100(EV, decision(before, {"a": 70, "b": 29}, verdicts), CFG)
    assert missing.detail == "regions ['a', 'b'] != configured ['a', 'b', 'c']"
    assert short.detail == "weights {'a': 70, 'b': 29} sum to 99, not 100"
    [negative] = weights_sum_100(EV, decision(before, {"a": 60, "b": 50, "c": -10}, verdicts), CFG)
    assert negative.detail == "a negative weight in {'a': 60, 'b': 50, 'c': -10}"


def test_within_capacity_checks_every_gainer_past_one_within_its_capacity() -> None:
    # Usable points: a 30, b 60, c 60. a gains within its 30; b is given 62 while c has room.
    d = decision({"a": 30, "b": 40, "c": 30}, {"a": 31, "b": 62, "c": 7}, {"a": H, "b": H, "c": H})
    [found] = within_capacity_while_headroom(capacity_world(), d, CFG)
    assert found.detail == "b given 62 over its usable 60.0 points while c had room"


def test_within_capacity_finding_lists_every_region_with_room() -> None:
    d = decision({"a": 25, "b": 45, "c": 30}, {"a": 40, "b": 30, "c": 30}, {"a": H, "b": H, "c": H})
    [found] = within_capacity_while_headroom(capacity_world(), d, CFG)
    assert found.detail == "a given 40 over its usable 30.0 points while b, c had room"


def test_a_region_missing_before_that_gains_one_point_gained() -> None:
    d = decision({"a": 50, "b": 50}, {"a": 50, "b": 49, "c": 1}, {"a": H, "b": H, "c": Verdict.UNKNOWN})
    assert [v.detail for v in no_share_onto_unsafe(EV, d, CFG)] == ["c is UNKNOWN and went 0 -> 1"]


def test_weights_not_summing_to_100_a_missing_region_gains_from_zero() -> None:
    # Before sums to 90: a and b keep their shares (66 of 60/90, 33 of 30/90); c gains its 1 from 0.
    d = decision({"a": 60, "b": 30}, {"a": 66, "b": 33, "c": 1}, {"a": H, "b": H, "c": G})
    assert [v.detail for v in no_share_onto_unsafe(EV, d, CFG)] == ["c is DEGRADED and went 0 -> 1"]


def test_weights_not_summing_to_100_one_point_over_the_share_is_a_gain() -> None:
    # Before sums to 90: a's 45 is a share of 50; 51 after is exactly one point more.
    d = decision({"a": 45, "b": 45}, {"a": 51, "b": 49}, {"a": G, "b": H})
    assert [v.detail for v in no_share_onto_unsafe(EV, d, CFG)] == ["a is DEGRADED and went 45 -> 51"]
