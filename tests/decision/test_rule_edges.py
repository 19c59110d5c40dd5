"""Edges of the rules' arithmetic: reconcile's allowance, the return step's headroom, and the shed's
and failover's exact outcomes (docs/decisions.md, Rules)."""

from __future__ import annotations

from drctl.decision import DecisionConfig, DecisionMemory, Verdict, decide
from drctl.decision.rules import reconcile
from drctl.decision.rules.failover import failover
from drctl.decision.rules.retreat import retreat
from drctl.decision.rules.returning import returning
from drctl.decision.rules.shed import _excess, shed
from tests.decision.facts import T0, at, capacity, dead, fleet, loaded, region, remembered, tick_of
from tests.decision.test_rule_shed import CFG as SHED_CFG
from tests.decision.test_rule_shed import world as shed_world

CFG = DecisionConfig(interval_s=10)


def three(**regions_kw: dict[str, object]):  # type: ignore[no-untyped-def]
    """a UNKNOWN (no probe), b and c HEALTHY, unless told otherwise."""
    kw: dict[str, dict[str, object]] = {"a": {"probe": None}, "b": {}, "c": {}}
    kw.update(regions_kw)
    return fleet([region("a", 40, **kw["a"]), region("b", 30, **kw["b"]), region("c", 30, **kw["c"])])


def allowed(in_effect: dict[str, int], applied: dict[str, int], memory=None, **regions_kw):  # type: ignore[no-untyped-def]
    tick = tick_of(three(**regions_kw), CFG, at(30), memory)
    return reconcile.allowed(tick, in_effect, applied)


def test_allowed_spreads_the_freed_share_over_the_receivers_by_their_applied_weight() -> None:
    # a may not receive: kept at its 40 in effect; the 30 it frees goes to b and c as 20:10.
    assert allowed({"a": 40, "b": 30, "c": 30}, {"a": 70, "b": 20, "c": 10}) == {"a": 40, "b": 40, "c": 20}


def test_allowed_counts_a_receiver_with_one_applied_point() -> None:
    assert allowed({"a": 40, "b": 30, "c": 30}, {"a": 70, "b": 29, "c": 1}) == {"a": 40, "b": 58, "c": 2}


def test_allowed_spreads_a_single_freed_point() -> None:
    assert allowed({"a": 50, "b": 30, "c": 20}, {"a": 51, "b": 40, "c": 9}) == {"a": 50, "b": 41, "c": 9}


def test_allowed_with_nothing_freed_keeps_the_applied_weights() -> None:
    # a (UNKNOWN) has no more applied than in effect: nothing is capped, nothing moves.
    assert allowed({"a": 60, "b": 20, "c": 20}, {"a": 50, "b": 25, "c": 25}) == {"a": 50, "b": 25, "c": 25}
    assert allowed({"a": 60, "b": 40, "c": 0}, {"a": 50, "b": 50, "c": 0}) == {"a": 50, "b": 50, "c": 0}
    assert allowed({"a": 60, "b": 20, "c": 20}, {"a": 52, "b": 1, "c": 47}) == {"a": 52, "b": 1, "c": 47}


def test_allowed_a_receiver_within_its_stability_window_still_takes_the_freed_share() -> None:
    # c's weight fell 5 s ago: reconcile is exempt from the stability window, so c still receives.
    turning = remembered(c={"last_direction": -1, "last_direction_change_at": at(25)})
    got = allowed({"a": 40, "b": 30, "c": 30}, {"a": 70, "b": 20, "c": 10}, turning)
    assert got == {"a": 40, "b": 40, "c": 20}


def test_allowed_with_no_receiver_and_one_point_freed_leaves_what_is_in_effect() -> None:
    nobody = {"b": {"probe": None}, "c": {"probe": None}}
    got = allowed({"a": 50, "b": 50, "c": 0}, {"a": 51, "b": 49, "c": 0}, **nobody)
    assert got == {"a": 50, "b": 50, "c": 0}


def _return_tick(a_usable: float):  # type: ignore[no-untyped-def]
    """a at 59 of its home 60, one point short; a point brings one load unit; b gives."""
    per_replica = a_usable / (2 * 0.8)
    ev = fleet(
        [
            region("a", 60, capacity=capacity(load=59.0, per_replica=per_replica)),
            region("b", 40, capacity=capacity(load=41.0, per_replica=None)),
        ],
        {"a": 59, "b": 41},
    )
    return tick_of(ev, CFG, at(30), remembered(a={"emptied_by": "failover", "since": at(0)}))


def test_return_step_is_never_past_the_regions_headroom() -> None:
    # Usable 59.5 points at a share of 59: less than a point of room, so the last point waits.
    assert returning(_return_tick(59.5), []) is None
    out = returning(_return_tick(60.5), [])
    assert out is not None and out.weights == {"a": 60, "b": 40}


def _lost_share(a_cap):  # type: ignore[no-untyped-def]
    """a's excess when its capacity in points is unknown (no per-replica figure): the share of
    the replicas it lost."""
    ev = fleet([region("a", 40, capacity=a_cap), region("b", 60)], {"a": 40, "b": 60})
    return _excess(tick_of(ev, CFG, at(30)), "a")


def test_shed_excess_without_capacity_figures_is_the_share_of_the_lost_replicas() -> None:
    assert _lost_share(capacity(ready=2, desired=4, per_replica=None)) == 20.0
    assert _lost_share(capacity(ready=1, desired=4, loading=1, per_replica=None)) == 20.0
    assert _lost_share(capacity(ready=1, desired=1, per_replica=None)) == 0.0
    assert _lost_share(capacity(ready=3, desired=2, per_replica=None)) == 0.0


def test_shed_excess_unknown_without_desired_replicas_or_capacity() -> None:
    assert _lost_share(capacity(ready=1, desired=0, per_replica=None)) is None
    assert _lost_share(None) is None


def _breached(*names: str, **extra: object):  # type: ignore[no-untyped-def]
    return remembered(**{r: {"breach_since": at(0), **extra} for r in names})


def _loads(**regions: tuple[int, int, float]):  # type: ignore[no-untyped-def]
    """Region -> (weight, ready replicas, load); 15 a replica, usable 12 each."""
    return fleet(
        [
            region(r, w, capacity=capacity(ready=ready, desired=max(ready, 2), load=load, per_replica=15.0))
            for r, (w, ready, load) in regions.items()
        ],
        {r: w for r, (w, _, _) in regions.items()},
    )


def test_shed_moves_every_breaching_regions_excess_down_to_one_point() -> None:
    # Usable points a 30, b 60, c 60: a is 9 over, b 1 over; both go to c.
    ev = shed_world(weights={"a": 39, "b": 61, "c": 0})
    out = shed(tick_of(ev, SHED_CFG, at(10), _breached("a", "b")), [])
    assert out is not None
    assert out.weights == {"a": 30, "b": 60, "c": 10}
    assert sorted(out.region_updates) == ["a", "b"]


def test_shed_a_region_exactly_at_its_usable_capacity_has_nothing_to_shed() -> None:
    # b carries exactly its 60 usable points: not over, so its remembered breach ends and it gives nothing.
    ev = shed_world(weights={"a": 40, "b": 60, "c": 0})
    out = shed(tick_of(ev, SHED_CFG, at(10), _breached("a", "b")), [])
    assert out is not None
    assert out.weights == {"a": 30, "b": 60, "c": 10}
    assert out.region_updates == {"a": {"emptied_by": "shed", "last_step_pct": 0}}


def test_shed_a_saturated_idle_region_beside_a_fleet_saturated_everywhere_takes_the_excess() -> None:
    # a and b carry all the share and are SATURATED; c, emptied earlier, is HEALTHY with none: it has
    # headroom, so the excess goes to it (not an evening-out between a and b, which has no c in it).
    ev = shed_world(weights={"a": 39, "b": 61, "c": 0})
    mem = remembered(
        a={"breach_since": at(0)}, b={"breach_since": at(0)}, c={"emptied_by": "failover", "since": at(5)}
    )
    decision, _ = decide(ev, mem, SHED_CFG, at(10))
    assert (decision.rule, decision.weights_after) == ("shed", {"a": 30, "b": 60, "c": 10})


def test_shed_a_saturated_region_within_its_share_of_capacity_gives_nothing_back() -> None:
    # 0.5 load a point. a: load 20 on one replica (usable 12), 24 points at a share of 50: 26 over.
    # b: load 25 on two (usable 24), SATURATED too, but 48 points at a share of 30: 18 under.
    ev = _loads(a=(50, 1, 20.0), b=(30, 2, 25.0), c=(20, 2, 5.0))
    out = shed(tick_of(ev, SHED_CFG, at(10), _breached("a", "b")), [])
    assert out is not None
    assert out.weights == {"a": 24, "b": 30, "c": 46}


def test_shed_spacing_note_names_every_breaching_region_with_share() -> None:
    ev = _loads(a=(1, 1, 20.0), b=(99, 2, 30.0), c=(0, 2, 0.0))
    mem = _breached("a", "b").model_copy(update={"next_shed_at": at(20)})
    notes: list[str] = []
    assert shed(tick_of(ev, SHED_CFG, at(10), mem), notes) is None
    assert notes == [f"shed: a, b waits for the step spacing until {at(20)}"]


def test_shed_a_breaching_region_without_share_is_not_shed_from() -> None:
    ev = _loads(a=(50, 2, 5.0), b=(50, 2, 5.0), c=(0, 2, 100.0))
    mem = _breached("c").model_copy(update={"next_shed_at": at(20)})
    notes: list[str] = []
    assert shed(tick_of(ev, SHED_CFG, at(10), mem), notes) is None
    assert notes == []


def test_shed_a_region_whose_weight_just_fell_keeps_falling() -> None:
    # a's weight fell 5 s ago: shedding more lowers it again, no turn, so the window does not hold it.
    mem = _breached("a", last_direction=-1, last_direction_change_at=at(5))
    cfg = SHED_CFG.model_copy(update={"stability_window_s": 30})
    out = shed(tick_of(shed_world(), cfg, at(10), mem), [])
    assert out is not None and out.weights == {"a": 30, "b": 39, "c": 31}


def test_shed_stability_note_names_every_region_held() -> None:
    ev = _loads(a=(40, 1, 20.0), b=(40, 2, 30.0), c=(20, 2, 0.0))
    mem = _breached("a", "b", last_direction=1, last_direction_change_at=at(5))
    notes: list[str] = []
    cfg = SHED_CFG.model_copy(update={"stability_window_s": 30})
    assert shed(tick_of(ev, cfg, at(10), mem), notes) is None
    assert notes[0] == "shed: a, b within the stability window"


DOWN = {"verdict": Verdict.DOWN, "since": T0, "consecutive_failures": 3}
FELL = {"last_direction": -1, "last_direction_change_at": at(25)}  # weight fell 5 s before at(30)
ROSE = {"last_direction": 1, "last_direction_change_at": at(25)}


def test_failover_drains_a_down_region_of_its_last_point() -> None:
    ev = fleet([region("a", 50, probe=dead()), region("b", 50)], {"a": 1, "b": 99})
    out = failover(tick_of(ev, CFG, at(30), remembered(a=DOWN)), [])
    assert out is not None and out.weights == {"a": 0, "b": 100}


def test_failover_gives_to_a_region_within_its_stability_window() -> None:
    # b's weight fell 5 s ago: failover is exempt from the window, so b still takes a's share.
    ev = fleet([region("a", 50, probe=dead()), region("b", 50)], {"a": 50, "b": 50})
    out = failover(tick_of(ev, CFG, at(30), remembered(a=DOWN, b=FELL)), [])
    assert out is not None and out.weights == {"a": 0, "b": 100}


def test_failover_with_no_receiver_holds_under_its_own_rule() -> None:
    ev = fleet([region("a", 50, probe=dead()), region("b", 50, probe=None)], {"a": 50, "b": 50})
    notes: list[str] = []
    out = failover(tick_of(ev, CFG, at(30), remembered(a=DOWN)), notes)
    assert out is not None
    assert (out.rule, out.action, out.weights, out.urgent) == ("failover", "hold", {"a": 50, "b": 50}, True)
    assert out.reasons == ["failover: a (50) DOWN but no region can receive; holding"]


def test_retreat_gives_back_a_one_point_step_and_a_last_point() -> None:
    ev = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 5, "b": 95})
    out = retreat(tick_of(ev, CFG, at(10), remembered(a={"last_step_pct": 1})), [])
    assert out is not None and out.weights == {"a": 4, "b": 96}
    ev = fleet([region("a", 60, probe=dead()), region("b", 40)], {"a": 1, "b": 99})
    out = retreat(tick_of(ev, CFG, at(10), remembered(a={"last_step_pct": 20})), [])
    assert out is not None and out.weights == {"a": 0, "b": 100}


def test_retreat_reason_names_every_region_that_gives_back() -> None:
    ev = fleet(
        [region("a", 40, probe=dead()), region("b", 30, probe=dead()), region("c", 30)],
        {"a": 30, "b": 20, "c": 50},
    )
    mem = remembered(a={"last_step_pct": 10}, b={"last_step_pct": 5})
    out = retreat(tick_of(ev, CFG, at(10), mem), [])
    assert out is not None
    assert out.reasons == [
        "retreat: a DEGRADED (-10), b DEGRADED (-5); the last step goes back: a 20 / b 15 / c 65"
    ]


def test_tick_serving_and_receivers_at_one_point_and_after_a_rise() -> None:
    ev = fleet([region("a", 50), region("b", 50)], {"a": 1, "b": 99})
    tick = tick_of(ev, CFG, at(30), remembered(a=ROSE))
    assert tick.serving() == ["a", "b"]
    # a rose 5 s ago: giving it more is no turn, so it may receive within the window.
    assert tick.receivers(set()) == ["a", "b"]


def _returning_three(mode: str = "automatic", **mem: dict[str, object]):  # type: ignore[no-untyped-def]
    ev = fleet([region("a", 40), region("b", 30), region("c", 30)], {"a": 30, "b": 20, "c": 50})
    return returning(tick_of(ev, CFG.model_copy(update={"mode": mode}), at(30), remembered(**mem)), [])


def test_failback_goes_on_in_mode_off_past_a_return_that_does_not() -> None:
    # Mode off stops a's return (emptied by a shed), not b's failback.
    out = _returning_three(
        "off", a={"emptied_by": "shed", "since": at(0)}, b={"emptied_by": "failover", "since": at(0)}
    )
    assert out is not None
    assert out.weights == {"a": 30, "b": 30, "c": 40}
    assert out.reasons[0].startswith("failback: b +10 ")


def test_return_reason_names_every_region_and_its_gain() -> None:
    out = _returning_three(
        a={"emptied_by": "failover", "since": at(0)}, b={"emptied_by": "failover", "since": at(0)}
    )
    assert out is not None
    assert out.weights == {"a": 40, "b": 30, "c": 30}
    assert out.reasons == ["failback: a +10, b +10 (HEALTHY for 30 s or more): a 40 / b 30 / c 30"]


def test_return_with_the_only_donor_in_its_window_and_another_region_at_home() -> None:
    # c (above home) rose 5 s ago and may not give; b sits at its home and has nothing to give.
    ev = fleet([region("a", 40), region("b", 30), region("c", 30)], {"a": 30, "b": 30, "c": 40})
    mem = remembered(a={"emptied_by": "failover", "since": at(0)}, c=ROSE)
    assert returning(tick_of(ev, CFG, at(30), mem), []) is None


def test_shed_two_donors_to_two_receivers_in_words() -> None:
    # 1.1 load a point (110 in all): a and b carry 40 each on one replica (27.3 points usable).
    ev = _loads(a=(40, 1, 20.0), b=(40, 1, 20.0), c=(10, 2, 2.0), d=(10, 2, 2.0))
    out = shed(tick_of(ev, SHED_CFG, at(10), _breached("a", "b")), [])
    assert out is not None
    assert out.weights == {"a": 27, "b": 27, "c": 23, "d": 23}
    assert out.reasons == [
        "shed: a, b over usable capacity for 10 s; 25.5 points to c, d: a 27 / b 27 / c 23 / d 23"
    ]


def test_shed_no_more_than_the_receivers_headroom() -> None:
    # 0.8 load a point: a carries 60 of its 15 usable points (45 over); b and c have 10 of room each.
    ev = _loads(a=(60, 1, 60.0), b=(20, 2, 10.0), c=(20, 2, 10.0))
    out = shed(tick_of(ev, SHED_CFG, at(10), _breached("a")), [])
    assert out is not None
    assert out.weights == {"a": 40, "b": 30, "c": 30}
    assert out.reasons == ["shed: a over usable capacity for 10 s; 20.0 points to b, c: a 40 / b 30 / c 30"]


def test_a_hand_edit_put_back_and_a_failback_step_on_top_in_one_tick() -> None:
    ev = fleet([region("a", 60), region("b", 40)], {"a": 30, "b": 70}, weights_applied={"a": 34, "b": 66})
    mem = remembered(a={"emptied_by": "failover", "since": at(0)})
    decision, _ = decide(ev, mem, CFG, at(30))
    assert (decision.rule, decision.weights_before, decision.weights_after) == (
        "failback",
        {"a": 30, "b": 70},
        {"a": 60, "b": 40},
    )
    assert (
        decision.reasons[0]
        == "reconcile: in effect a 30 / b 70 differs from applied a 34 / b 66; re-asserted"
    )


def test_applied_weights_all_zero_are_the_home_weights_of_the_healthy_regions() -> None:
    # a is UNKNOWN: the applied weights, all zero, stand for b's home alone, and a may not get more
    # than it has in effect.
    ev = fleet(
        [region("a", 60, probe=None), region("b", 40)], {"a": 60, "b": 40}, weights_applied={"a": 0, "b": 0}
    )
    decision, _ = decide(ev, DecisionMemory(), CFG, at(30))
    assert (decision.rule, decision.weights_after) == ("reconcile", {"a": 0, "b": 100})


def test_fleet_wide_overload_two_donors_give_down_to_the_level() -> None:
    # Everyone SATURATED (2 load a point): usable 12 / 24 / 36 are 6 / 12 / 18 points, 36 in all.
    # The level is 100 / 36: a 16.7, b 33.3, c 50; a gives 23.3 and b 6.7, c takes both.
    w = {"a": 40, "b": 40, "c": 20}
    ev = fleet(
        [
            loaded("a", 40, w, 200, ready=1),
            loaded("b", 40, w, 200, ready=2),
            loaded("c", 20, w, 200, ready=3),
        ],
        w,
    )
    out = shed(tick_of(ev, SHED_CFG, at(10), _breached("a", "b", "c")), [])
    assert out is not None
    assert out.weights == {"a": 17, "b": 33, "c": 50}
