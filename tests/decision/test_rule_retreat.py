"""Rule `retreat`: the last failback or return step goes back when its region stops being HEALTHY."""

from __future__ import annotations

from drctl.decision import DecisionConfig, Verdict
from drctl.decision.rules.retreat import retreat
from tests.decision.facts import T0, at, dead, fleet, probe, region, remembered, tick_of

CFG = DecisionConfig(interval_s=10)
W = {"a": 34, "b": 66}


def ev(a_probe=None, b_probe=None):  # type: ignore[no-untyped-def]
    return fleet([region("a", 60, probe=a_probe or probe()), region("b", 40, probe=b_probe or probe())], W)


def test_a_failing_region_gives_back_its_last_step() -> None:
    mem = remembered(a={"last_step_pct": 34, "emptied_by": "failover", "since": T0})
    out = retreat(tick_of(ev(a_probe=dead()), CFG, at(10), mem), [])
    assert out is not None
    assert (out.rule, out.action, out.weights, out.urgent) == (
        "retreat",
        "failback",
        {"a": 0, "b": 100},
        True,
    )
    assert out.region_updates == {"a": {"last_step_pct": 0}}
    assert out.reasons == ["retreat: a DEGRADED (-34); the last step goes back: a 0 / b 100"]


def test_only_the_last_step() -> None:
    mem = remembered(a={"last_step_pct": 10, "emptied_by": "shed"})
    out = retreat(tick_of(ev(a_probe=dead()), CFG, at(10), mem), [])
    assert out is not None
    assert (out.action, out.weights) == ("return", {"a": 24, "b": 76})


def test_never_more_than_the_region_has() -> None:
    low = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 5, "b": 95})
    out = retreat(tick_of(low, CFG, at(10), remembered(a={"last_step_pct": 20})), [])
    assert out is not None
    assert out.weights == {"a": 0, "b": 100}


def test_healthy_or_no_step_or_no_share_does_not_fire() -> None:
    assert retreat(tick_of(ev(), CFG, at(10), remembered(a={"last_step_pct": 34})), []) is None
    assert retreat(tick_of(ev(a_probe=dead()), CFG, at(10), remembered(a={"last_step_pct": 0})), []) is None
    empty = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 0, "b": 100})
    assert retreat(tick_of(empty, CFG, at(10), remembered(a={"last_step_pct": 34})), []) is None


def test_goes_even_within_the_stability_window() -> None:
    mem = remembered(
        a={"last_step_pct": 34, "last_direction": 1, "last_direction_change_at": at(5)},
        b={"last_direction": -1, "last_direction_change_at": at(5)},
    )
    out = retreat(tick_of(ev(a_probe=dead()), CFG, at(10), mem), [])
    assert out is not None and out.weights == {"a": 0, "b": 100}


def test_no_receiver_holds_with_a_note() -> None:
    mem = remembered(a={"last_step_pct": 34}, b={"verdict": Verdict.DOWN, "consecutive_failures": 3})
    notes: list[str] = []
    assert retreat(tick_of(ev(a_probe=dead(), b_probe=dead()), CFG, at(10), mem), notes) is None
    assert notes == ["retreat: a DEGRADED (-34), but no region can receive; holding"]
