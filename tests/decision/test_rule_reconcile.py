"""Rule `reconcile`: weights in effect that drifted from those applied are re-asserted or reported."""

from __future__ import annotations

from drctl.decision import DecisionConfig, Verdict, decide, note_apply_failed
from drctl.decision.rules import reconcile
from tests.decision.facts import T0, at, checked, dead, fleet, region, remembered, tick_of

CFG = DecisionConfig(interval_s=10)
DOWN = {"verdict": Verdict.DOWN, "since": T0, "consecutive_failures": 3, "emptied_by": "failover"}


def two(in_effect, applied, a_probe=None):  # type: ignore[no-untyped-def]
    regions = [region("a", 60, **({"probe": a_probe} if a_probe is not None else {})), region("b", 40)]
    return fleet(regions, in_effect, weights_applied=applied)


def test_drift() -> None:
    assert reconcile.drift({"a": 1}, {"a": 2}) is True
    assert reconcile.drift({"a": 1}, {"a": 1}) is False
    assert reconcile.drift(None, {"a": 1}) is False
    assert reconcile.drift({"a": 1}, None) is False


def test_allowed_keeps_a_region_that_may_not_receive_at_what_it_has() -> None:
    tick = tick_of(
        two({"a": 60, "b": 40}, {"a": 0, "b": 100}, a_probe=dead()), CFG, at(30), remembered(a=DOWN)
    )
    assert reconcile.allowed(tick, {"a": 60, "b": 40}, {"a": 0, "b": 100}) == {"a": 0, "b": 100}
    degraded = tick_of(two({"a": 40, "b": 60}, {"a": 60, "b": 40}, a_probe=dead()), CFG, at(0))
    assert reconcile.allowed(degraded, {"a": 40, "b": 60}, {"a": 60, "b": 40}) == {"a": 40, "b": 60}


def test_allowed_with_no_taker_leaves_what_is_in_effect() -> None:
    tick = tick_of(fleet([region("a", 60, probe=dead()), region("b", 40, probe=dead())]), CFG, at(0))
    assert reconcile.allowed(tick, {"a": 40, "b": 60}, {"a": 60, "b": 40}) == {"a": 40, "b": 60}


def test_allowed_gives_freed_share_to_an_eligible_region_with_no_applied_share() -> None:
    ev = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 40, "b": 60})
    tick = tick_of(ev, CFG, at(0))
    assert reconcile.allowed(tick, {"a": 40, "b": 60}, {"a": 100, "b": 0}) == {"a": 40, "b": 60}


def test_global_tier_restarted_mid_failover_is_re_asserted() -> None:
    ev = two({"a": 60, "b": 40}, {"a": 0, "b": 100}, a_probe=dead())
    d, mem = checked(ev, remembered(a=DOWN), CFG, at(30))
    assert (d.action, d.rule, d.weights_after, d.advisory) == (
        "reconcile",
        "reconcile",
        {"a": 0, "b": 100},
        False,
    )
    assert d.weights_before == {"a": 60, "b": 40}
    assert d.reasons == ["reconcile: in effect a 60 / b 40 differs from applied a 0 / b 100; re-asserted"]
    assert mem.last_applied == {"a": 0, "b": 100}


def test_advise_reports_and_a_dead_region_still_fails_over() -> None:
    cfg = CFG.model_copy(update={"mode": "advise"})
    healthy = two({"a": 50, "b": 50}, {"a": 60, "b": 40})
    d, mem = checked(healthy, remembered(), cfg, at(0))
    assert (d.action, d.advisory, d.weights_after) == ("reconcile", True, {"a": 50, "b": 50})
    assert d.reasons == [
        "reconcile: in effect a 50 / b 50 differs from applied a 60 / b 40; advise: reported, not corrected"
    ]
    assert mem.last_applied is None
    d, _ = checked(
        two({"a": 60, "b": 40}, {"a": 0, "b": 100}, a_probe=dead()), remembered(a=DOWN), cfg, at(30)
    )
    assert (d.action, d.weights_after, d.advisory) == ("failover", {"a": 0, "b": 100}, False)


def test_a_hand_edit_is_put_back_with_the_next_rule_on_top() -> None:
    d, _ = checked(two({"a": 50, "b": 50}, {"a": 60, "b": 40}), remembered(), CFG, at(0))
    assert (d.action, d.weights_after) == ("reconcile", {"a": 60, "b": 40})
    both = two({"a": 50, "b": 50}, {"a": 70, "b": 30}, a_probe=dead())
    d, _ = checked(both, remembered(a=DOWN), CFG, at(30))
    assert (d.action, d.weights_after) == ("failover", {"a": 0, "b": 100})
    assert d.reasons[0] == "reconcile: in effect a 50 / b 50 differs from applied a 70 / b 30; re-asserted"
    assert d.reasons[1].startswith("failover: a (")


def test_weights_not_summing_to_100_are_normalised() -> None:
    d, _ = checked(two({"a": 40, "b": 40}, None), remembered(), CFG, at(0))
    assert (d.action, d.weights_after) == ("reconcile", {"a": 50, "b": 50})
    d, _ = checked(two({"a": 40, "b": 40}, None, a_probe=dead()), remembered(), CFG, at(0))
    assert d.weights_after == {"a": 40, "b": 60}
    d, _ = checked(two({"a": 90, "b": 60}, None), remembered(), CFG, at(0))
    assert d.weights_after == {"a": 60, "b": 40}
    d, _ = checked(two({"a": 0, "b": 0}, None), remembered(), CFG, at(0))
    assert d.weights_after == {"a": 60, "b": 40}


def test_unknown_and_missing_regions_in_effect() -> None:
    d, _ = checked(two({"a": 60, "b": 40, "zz": 5}, {"a": 60, "b": 40}), remembered(), CFG, at(0))
    assert (d.action, d.weights_after) == ("hold", {"a": 60, "b": 40})
    d, _ = checked(two({"a": 100}, {"a": 60, "b": 40}), remembered(), CFG, at(0))
    assert (d.action, d.weights_after, d.weights_before) == (
        "reconcile",
        {"a": 60, "b": 40},
        {"a": 100, "b": 0},
    )


def test_unreadable_weights_hold_but_failover_still_goes() -> None:
    ev = two(None, {"a": 60, "b": 40}).model_copy(update={"weights_in_effect": None})
    d, _ = checked(ev, remembered(), CFG, at(0))
    assert (d.action, d.weights_after) == ("hold", {"a": 60, "b": 40})
    assert d.reasons == ["hold: the weights in effect are unreadable; only safety moves (failover, retreat)"]
    dead_a = two(None, {"a": 60, "b": 40}, a_probe=dead()).model_copy(update={"weights_in_effect": None})
    d, _ = checked(dead_a, remembered(a=DOWN), CFG, at(30))
    assert (d.action, d.weights_after) == ("failover", {"a": 0, "b": 100})


def test_unreadable_and_never_applied_starts_from_home() -> None:
    ev = two(None, None).model_copy(update={"weights_in_effect": None})
    d, _ = decide(ev, remembered(), CFG, at(0))
    assert d.weights_after == {"a": 60, "b": 40}
    d, _ = decide(ev, remembered().model_copy(update={"last_applied": {"a": 10, "b": 90}}), CFG, at(0))
    assert d.weights_after == {"a": 10, "b": 90}


def test_drift_during_backoff_is_reported_not_corrected() -> None:
    mem = note_apply_failed(remembered(), at(0), 30)
    d, _ = checked(two({"a": 50, "b": 50}, {"a": 60, "b": 40}), mem, CFG, at(10))
    assert (d.action, d.advisory, d.weights_after) == ("reconcile", True, {"a": 50, "b": 50})
    assert d.reasons == [
        "reconcile: in effect a 50 / b 50 differs from applied a 60 / b 40; back-off: reported, not corrected"
    ]


def test_all_zero_weights_go_to_the_healthy_regions() -> None:
    ev = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 0, "b": 0}, weights_applied=None)
    d, _ = checked(ev, remembered(), CFG, at(0))
    assert d.weights_after == {"a": 0, "b": 100}
    unknown = fleet(
        [region("a", 60, probe=None), region("b", 40, probe=None)], {"a": 0, "b": 0}, weights_applied=None
    )
    d, _ = checked(unknown, remembered(), CFG, at(0))
    assert d.weights_after == {"a": 60, "b": 40}
    zero_home = fleet(
        [region("a", 0), region("b", 0), region("c", 100, probe=dead())],
        {"a": 0, "b": 0, "c": 0},
        weights_applied=None,
    )
    d, _ = checked(zero_home, remembered(), CFG, at(0))
    assert d.weights_after == {"a": 50, "b": 50, "c": 0}
