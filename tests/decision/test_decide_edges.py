"""decide.py: what the decision carries over from the tick and the rule (figures, superseded
operations)."""

from __future__ import annotations

from drctl.decision import DecisionConfig, DecisionMemory, Operation, Verdict, decide
from drctl.decision.decide import _normalised
from tests.decision.facts import T0, at, dead, fleet, loaded, region, remembered

CFG = DecisionConfig(interval_s=10)


def test_usable_points_are_reported_to_three_decimals() -> None:
    w = {"a": 50, "b": 50}
    # 0.7 load a point; usable 2 x 15 x 0.8 = 24: 34.2857... points.
    ev = fleet([loaded("a", 50, w, 70), loaded("b", 50, w, 70)], w)
    decision, _ = decide(ev, DecisionMemory(), CFG, at(0))
    assert decision.evidence["a"]["usable_points"] == 34.286
    assert decision.evidence["b"]["usable_points"] == 34.286


def test_a_failover_reports_the_operations_it_supersedes() -> None:
    ops = [Operation(kind="failback", started_at=T0), Operation(kind="break_glass", started_at=T0)]
    ev = fleet([region("a", 50, probe=dead()), region("b", 50)], operations=ops)
    down = remembered(a={"verdict": Verdict.DOWN, "since": T0, "consecutive_failures": 3})
    decision, _ = decide(ev, down, CFG, at(10))
    assert (decision.rule, decision.weights_after) == ("failover", {"a": 0, "b": 100})
    assert decision.superseded == ["failback"]


def test_a_one_point_move_is_remembered_as_a_direction() -> None:
    # a, emptied by a failover, is one point short of home and HEALTHY for 30 s: the last point
    # comes back, and a one-point rise is a rise (b's one-point fall a fall).
    w = {"a": 59, "b": 41}
    ev = fleet([region("a", 60), region("b", 40)], w)
    mem = remembered(a={"emptied_by": "failover", "since": at(0)})
    decision, new = decide(ev, mem, CFG, at(30))
    assert (decision.rule, decision.weights_after) == ("failback", {"a": 60, "b": 40})
    assert (new.regions["a"].last_direction, new.regions["a"].last_direction_change_at) == (1, at(30))
    assert (new.regions["b"].last_direction, new.regions["b"].last_direction_change_at) == (-1, at(30))


H2 = {"a": 50, "b": 50}
H3 = {"a": 40, "b": 30, "c": 30}


def test_normalised_a_single_point_left_grows_onto_the_healthy_region_that_has_it() -> None:
    assert _normalised({"a": 1, "b": 0}, H2, ["a", "b"]) == {"a": 100, "b": 0}


def test_normalised_a_single_point_and_nothing_healthy_is_scaled() -> None:
    assert _normalised({"a": 1, "b": 0}, H2, []) == {"a": 100, "b": 0}


def test_normalised_all_zero_goes_to_the_healthy_regions_by_home_weight() -> None:
    # Homes of the HEALTHY a and b sum to one point: still by home weight, not evenly.
    assert _normalised({"a": 0, "b": 0, "c": 0}, {"a": 1, "b": 0, "c": 99}, ["a", "b"]) == {
        "a": 100,
        "b": 0,
        "c": 0,
    }


def test_normalised_over_100_is_scaled_down_whatever_is_healthy() -> None:
    assert _normalised({"a": 60, "b": 60}, H2, ["b"]) == {"a": 50, "b": 50}


def test_normalised_under_100_the_missing_share_goes_to_the_healthy_by_their_weight() -> None:
    # 50 missing, onto a and b as 30:10: a 67.5, b 22.5, c 10.
    assert _normalised({"a": 30, "b": 10, "c": 10}, H3, ["a", "b"]) == {"a": 68, "b": 22, "c": 10}


def test_normalised_under_100_healthy_regions_without_share_take_it_evenly() -> None:
    assert _normalised({"a": 50, "b": 0, "c": 0}, H3, ["b", "c"]) == {"a": 50, "b": 25, "c": 25}


def test_normalised_exactly_the_missing_share_goes_to_the_healthy() -> None:
    assert _normalised({"a": 10, "b": 0, "c": 70}, H3, ["a"]) == {"a": 30, "b": 0, "c": 70}
