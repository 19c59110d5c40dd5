"""The monitor's rebalance decision (drctl/models/rebalance_decision.py) at its edges: the limits of
each rule, the memory it must not change, and what its record says. The rules themselves are in
tests/units/test_rebalance_decision.py, whose builders these reuse."""

from __future__ import annotations

from datetime import timedelta

from drctl.config.capacity import RebalanceLimits
from drctl.models.capacity import BreachState, CapacitySpec, RegionCapacity, RegionSignals
from drctl.models.fleet_spec import FleetSpec
from drctl.models.rebalance import RebalanceMemory
from drctl.models.rebalance_decision import (
    ALL_WITHIN,
    MIN_REQUESTS,
    after_step,
    capacity_spec,
    decide_rebalance,
    evidence,
    observed,
    passive_ttft_breaches,
    thresholds,
)
from tests.support.config import spec as make_spec
from tests.units.test_rebalance_decision import HOME, SPEC, T0, _calm, _run, _sig, _slow_a, _tick

# No max_concurrency_per_replica: the capacity is learned from the slot ceilings the replicas show.
LEARNED = SPEC.model_copy(update={"max_concurrency_per_replica": None})
LONG_AGO = T0 - timedelta(seconds=60)  # a return planned since then is past return_stable_s


def _three(c_weight: int = 0) -> FleetSpec:
    return make_spec([("a", 60, 2), ("b", 40, 2), ("c", c_weight, 2)]).model_copy(
        update={
            "rebalance": "automatic",
            "max_concurrency_per_replica": 4,
            "rebalance_limits": SPEC.rebalance_limits,
        }
    )


def _calm3() -> dict[str, RegionSignals]:
    return {"a": _sig("a"), "b": _sig("b"), "c": _sig("c")}


def _seqs(region: str, max_num_seqs: int) -> RegionSignals:
    """A region's calm signals, its servers telling their max_num_seqs."""
    return _sig(region).model_copy(update={"max_num_seqs": max_num_seqs})


def _shed_from_a(at: float = 0) -> RebalanceMemory:
    """The memory after a step that shed 20 of a's 60 onto b, `at` seconds after T0."""
    return RebalanceMemory(
        moved={"a": -20, "b": 20},
        last_set={"a": 40, "b": 60},
        return_since=T0 + timedelta(seconds=at),
    )


# --- the capacity model's settings and the remembered slot ceilings ---------------------------------


def test_the_capacity_settings_are_the_fleets() -> None:
    limits = SPEC.rebalance_limits.model_copy(update={"target_utilisation": 0.7})
    spec = SPEC.model_copy(update={"max_rps_per_replica": 12.5, "rebalance_limits": limits})
    assert capacity_spec(spec) == CapacitySpec(
        max_rps_per_replica=12.5,
        max_concurrency_per_replica=4,
        target_utilisation=0.7,
        ttft_p99_ms=SPEC.slo.ttft_p99_ms,
    )


def test_a_remembered_slot_ceiling_gives_a_region_that_never_queued_its_capacity() -> None:
    v = decide_rebalance(_tick(_calm()), RebalanceMemory(ceilings={"a": 4.0, "b": 4.0}), LEARNED, T0)
    assert v.caps["a"].known and v.caps["a"].per_replica == 4.0
    assert v.decision.action == "hold" and v.at_rest


def test_a_slot_ceiling_seen_is_remembered_for_every_region() -> None:
    v = decide_rebalance(_tick({"a": _seqs("a", 8), "b": _sig("b")}), RebalanceMemory(), LEARNED, T0)
    assert v.memory.ceilings == {"a": 8.0, "b": 8.0}


def test_a_region_not_read_keeps_its_remembered_ceiling() -> None:
    mem = RebalanceMemory(ceilings={"a": 4.0, "b": 4.0})
    v = decide_rebalance(_tick({"a": _sig("a")}, missing=["b: no answer"]), mem, LEARNED, T0)
    assert v.memory.ceilings == {"a": 4.0, "b": 4.0}


def test_learning_a_ceiling_does_not_change_the_memory_given() -> None:
    mem = RebalanceMemory(ceilings={"a": 4.0})
    v = decide_rebalance(_tick({"a": _seqs("a", 8), "b": _sig("b")}), mem, LEARNED, T0)
    assert v.memory.ceilings["a"] == 8.0
    assert mem.ceilings == {"a": 4.0}


# --- which readings breach ----------------------------------------------------------------------------


def test_an_error_rate_over_too_few_requests_is_no_breach() -> None:
    few = {"a": _sig("a", error_rate=0.5, requests=MIN_REQUESTS - 1), "b": _sig("b")}
    v = decide_rebalance(_tick(few), RebalanceMemory(), SPEC, T0)
    assert v.decision.reasons == [ALL_WITHIN] and v.at_rest and not v.urgent
    enough = {"a": _sig("a", error_rate=0.5, requests=MIN_REQUESTS), "b": _sig("b")}
    v = decide_rebalance(_tick(enough), RebalanceMemory(), SPEC, T0)
    assert v.urgent and set(v.memory.breaches.since["a"]) == {"errors"}


def test_a_passive_ttft_at_the_objective_is_no_breach() -> None:
    objective = SPEC.slo.ttft_p99_ms
    assert passive_ttft_breaches({"a": objective}, objective) == {}
    assert set(passive_ttft_breaches({"a": objective + 1}, objective)) == {"a"}


def test_a_suspects_passive_ttft_is_a_ttft_breach() -> None:
    v = decide_rebalance(_tick(_calm(), suspects={"a": 2000.0}), RebalanceMemory(), SPEC, T0)
    assert set(v.memory.breaches.since["a"]) == {"ttft"}
    assert "passive signals" in v.memory.breaches.reasons["a"]["ttft"]


def test_a_suspects_histograms_ttft_breach_is_not_replaced_by_its_passive_one() -> None:
    v = decide_rebalance(_tick(_slow_a(900), suspects={"a": 2000.0}), RebalanceMemory(), SPEC, T0)
    why = v.memory.breaches.reasons["a"]["ttft"]
    assert "900 ms" in why and "passive" not in why


def test_a_suspect_whose_replicas_show_no_ttft_sheds_on_its_passive_one() -> None:
    sig = {"a": _sig("a", ttft=None), "b": _sig("b")}
    v = decide_rebalance(_tick(sig, suspects={"a": 2000.0}), RebalanceMemory(), SPEC, T0)
    assert v.decision.action == "shed"
    assert v.memory.breaches.since["a"] == {
        "ttft": T0 - timedelta(seconds=SPEC.rebalance_limits.breach_window_s)
    }


def test_a_suspect_not_read_has_no_breach_window() -> None:
    tick = _tick({"b": _sig("b")}, suspects={"a": 2000.0}, missing=["a: no answer"])
    v = decide_rebalance(tick, RebalanceMemory(), SPEC, T0)
    assert v.decision.action == "hold" and "a" not in v.memory.breaches.since


def test_a_slow_first_token_backdates_only_the_ttft_breach() -> None:
    sig = {"a": _sig("a", ttft=900, error_rate=0.5), "b": _sig("b")}
    v = decide_rebalance(_tick(sig), RebalanceMemory(), SPEC, T0)
    assert v.memory.breaches.since["a"] == {"ttft": T0 - timedelta(milliseconds=900), "errors": T0}
    assert v.decision.action == "hold" and v.urgent


def test_a_capacity_shortfall_sheds_only_once_sustained_for_the_window() -> None:
    over = {"a": _sig("a", running=10), "b": _sig("b")}  # 10 running > 2 x 4 x 0.8 usable
    vs = _run([(0, _tick(over)), (2.5, _tick(over))])
    assert [v.decision.action for v in vs] == ["hold", "shed"]
    assert vs[0].urgent and set(vs[0].memory.breaches.since["a"]) == {"capacity"}


# --- the reasons a breach being timed gives -------------------------------------------------------------


def test_a_breach_seen_first_now_is_timed_from_now_with_every_kind() -> None:
    sig = {"a": _sig("a", running=10, error_rate=0.5), "b": _sig("b")}
    v = decide_rebalance(_tick(sig), RebalanceMemory(), SPEC, T0)
    kinds = v.memory.breaches.reasons["a"]
    assert set(kinds) == {"capacity", "errors"}
    assert f"a breaching for 0.0 s of the 2 s window: {kinds['capacity']}; {kinds['errors']}" in (
        v.decision.reasons
    )


def test_breaches_seen_again_during_the_drain_each_give_their_reason() -> None:
    # a sheds on a 3 s TTFT, short of capacity and failing: every window restarts once it drained.
    sig = {"a": _sig("a", running=10, ttft=3000, error_rate=0.5), "b": _sig("b")}
    v = _run([(0, _tick(sig, suspects={"a": None}))])[0]
    assert v.decision.action == "shed"
    mem = after_step(v.memory, v.decision, v.plan, v.caps, SPEC, T0)
    # 1 s later a is still short and failing, and b fails too (seen first now).
    again = {"a": _sig("a", running=10, error_rate=0.5), "b": _sig("b", error_rate=0.5)}
    later = decide_rebalance(_tick(again, v.decision.weights_after), mem, SPEC, T0 + timedelta(seconds=1))
    a, b = later.memory.breaches.reasons["a"], later.memory.breaches.reasons["b"]
    assert later.decision.action == "hold" and later.urgent
    assert (
        "a breaching; its window starts at 12:00:03, once the requests queued before the last step "
        f"have had their first token: {a['capacity']}; {a['errors']}"
    ) in later.decision.reasons
    assert f"b breaching for 0.0 s of the 2 s window: {b['errors']}" in later.decision.reasons


# --- which regions may take or give share ---------------------------------------------------------------


def test_a_region_the_rebalance_emptied_gets_its_share_back() -> None:
    mem = RebalanceMemory(moved={"a": -60, "b": 60}, last_set={"a": 0, "b": 100}, return_since=LONG_AGO)
    v = decide_rebalance(_tick(_calm(), {"a": 0, "b": 100}), mem, SPEC, T0)
    assert v.decision.action == "return" and v.decision.weights_after["a"] > 0


def test_a_single_point_the_rebalance_moved_off_an_emptied_region_returns() -> None:
    current = {"a": 0, "b": 60, "c": 40}
    mem = RebalanceMemory(moved={"a": -1, "b": 1}, last_set=current, return_since=LONG_AGO)
    v = decide_rebalance(_tick(_calm3(), current), mem, _three(), T0)
    assert v.decision.action == "return" and v.decision.weights_after == {"a": 1, "b": 59, "c": 40}


def test_a_region_carrying_only_what_the_rebalance_moved_there_gives_it_back() -> None:
    current = {"a": 40, "b": 40, "c": 20}
    mem = RebalanceMemory(moved={"a": -20, "c": 20}, last_set=current, return_since=LONG_AGO)
    v = decide_rebalance(_tick(_calm3(), current), mem, _three(), T0)
    assert v.decision.action == "return" and v.decision.weights_after == {"a": 60, "b": 40, "c": 0}
    # Down to a single point moved there.
    current = {"a": 59, "b": 40, "c": 1}
    mem = RebalanceMemory(moved={"a": -1, "c": 1}, last_set=current, return_since=LONG_AGO)
    v = decide_rebalance(_tick(_calm3(), current), mem, _three(), T0)
    assert v.decision.action == "return" and v.decision.weights_after == {"a": 60, "b": 40, "c": 0}


def test_a_region_carrying_only_what_the_rebalance_moved_there_sheds_when_it_breaches() -> None:
    for current, moved in (
        ({"a": 40, "b": 40, "c": 20}, {"a": -20, "c": 20}),
        ({"a": 59, "b": 40, "c": 1}, {"a": -1, "c": 1}),
    ):
        mem = RebalanceMemory(moved=moved, last_set=current)
        sig = {**_calm3(), "c": _sig("c", ttft=3000)}
        v = decide_rebalance(_tick(sig, current, suspects={"c": None}), mem, _three(), T0)
        assert v.decision.action == "shed" and v.decision.weights_after["c"] < current["c"]


def test_a_region_read_but_without_weight_is_neither_shed_from_nor_given_share() -> None:
    sig = {"a": _sig("a", ttft=3000), "b": _sig("b"), "c": _sig("c", running=0)}
    v = decide_rebalance(_tick(sig), RebalanceMemory(), SPEC, T0)
    assert v.decision.action == "shed"
    assert set(v.decision.weights_after) == {"a", "b"} and sum(v.decision.weights_after.values()) == 100
    assert v.decision.weights_after["b"] > HOME["b"]


# --- the gates: what a held step records ---------------------------------------------------------------


def test_a_return_held_for_stability_is_recorded_as_held() -> None:
    v = decide_rebalance(_tick(_calm(), {"a": 40, "b": 60}), _shed_from_a(at=0), SPEC, T0)
    assert v.plan.action == "return"
    assert (v.decision.action, v.decision.outcome) == ("hold", "held")


def test_a_shed_held_by_the_spacing_is_recorded_as_held() -> None:
    mem = RebalanceMemory(next_shed_at=T0 + timedelta(seconds=1))
    v = decide_rebalance(_tick(_slow_a(3000)), mem, SPEC, T0)
    assert v.plan.action == "shed"
    assert (v.decision.action, v.decision.outcome) == ("hold", "held")


def test_a_step_held_by_the_back_off_is_recorded_as_held() -> None:
    mem = RebalanceMemory(not_before=T0 + timedelta(seconds=1))
    v = decide_rebalance(_tick(_slow_a(3000)), mem, SPEC, T0)
    assert v.plan.action == "shed"
    assert (v.decision.action, v.decision.outcome) == ("hold", "held")


def test_a_failed_return_holds_the_next_return() -> None:
    mem = _shed_from_a(at=-60).model_copy(
        update={"not_before": T0 + timedelta(seconds=30), "not_before_shed": False}
    )
    v = decide_rebalance(_tick(_calm(), {"a": 40, "b": 60}), mem, SPEC, T0)
    assert v.plan.action == "return" and v.decision.action == "hold"
    assert "the last step failed: no other before 12:00:30" in v.decision.reasons
    v = decide_rebalance(_tick(_calm(), {"a": 40, "b": 60}), mem, SPEC, T0 + timedelta(seconds=30))
    assert v.decision.action == "return"


def test_a_back_off_with_nothing_to_do_leaves_the_fleet_at_rest() -> None:
    mem = RebalanceMemory(not_before=T0 + timedelta(seconds=30))
    v = decide_rebalance(_tick(_calm()), mem, SPEC, T0)
    assert v.decision.action == "hold" and v.decision.reasons == [ALL_WITHIN] and v.at_rest


def test_a_step_records_the_share_it_moves() -> None:
    v = decide_rebalance(_tick(_slow_a(3000)), RebalanceMemory(), SPEC, T0)
    assert v.decision.action == "shed" and v.decision.moved_pct == v.plan.moved_pct > 0


# --- after a step --------------------------------------------------------------------------------------


def test_after_step_does_not_change_the_memory_given() -> None:
    v = decide_rebalance(_tick(_slow_a(3000)), RebalanceMemory(), SPEC, T0)
    v.decision.outcome = "applied"
    before = v.memory.model_dump()
    mem = after_step(v.memory, v.decision, v.plan, v.caps, SPEC, T0)
    assert mem.moved == {"a": v.decision.weights_after["a"] - 60, "b": v.decision.weights_after["b"] - 40}
    assert v.memory.model_dump() == before


def test_a_step_off_a_region_without_a_ttft_reading_restarts_its_window_at_once() -> None:
    over = {"a": _sig("a", running=10, ttft=None), "b": _sig("b", ttft=None)}
    v = _run([(0, _tick(over)), (2.5, _tick(over))])[1]
    assert v.decision.action == "shed"
    now = T0 + timedelta(seconds=2.5)
    mem = after_step(v.memory, v.decision, v.plan, v.caps, SPEC, now)
    assert mem.breaches.since["a"] == {"capacity": now}
    # Nor when the caller has no capacity of it at all.
    caps = {r: c for r, c in v.caps.items() if r != "a"}
    assert after_step(v.memory, v.decision, v.plan, caps, SPEC, now).breaches.since["a"] == {"capacity": now}


# --- the pieces -----------------------------------------------------------------------------------------


def test_a_region_not_read_loses_its_breach_reasons_too() -> None:
    state = observed(BreachState(), {"a": {"ttft": "a slow"}, "b": {"errors": "b failing"}}, T0)
    out = observed(state, {"b": {"errors": "b failing"}}, T0 + timedelta(seconds=1))
    assert out.since == {"b": {"errors": T0}} and out.reasons == {"b": {"errors": "b failing"}}


def test_the_evidence_names_the_unit_source_and_what_was_not_read() -> None:
    cap = RegionCapacity(
        region="a",
        capacity=8,
        load=2,
        usable=6.4,
        headroom=0,
        unit="concurrency",
        per_replica=4,
        source="learned",
        evidence={"running": 2.0},
        known=False,
        problems=["p" * 200, "q" * 200],
    )
    plain = cap.model_copy(update={"region": "b", "known": True, "problems": [], "unit": "rps"})
    out = evidence({"a": cap, "b": plain})
    assert out["a"] == {
        "running": 2.0,
        "unit": "concurrency",
        "source": "learned",
        "known": "False",
        "problems": ("p" * 200 + "; " + "q" * 200)[:300],
    }
    assert len(out["a"]["problems"]) == 300
    assert out["b"] == {"running": 2.0, "unit": "rps", "source": "learned", "known": "True"}


def test_the_thresholds_recorded_are_the_specs() -> None:
    lim = RebalanceLimits(
        breach_window_s=7,
        min_step_pct=3,
        max_shift_pct=40,
        hysteresis_pct=15,
        target_utilisation=0.6,
    )
    spec = SPEC.model_copy(update={"rebalance_limits": lim})
    assert thresholds(spec) == {
        "slo_ttft_p99_ms": spec.slo.ttft_p99_ms,
        "slo_error_rate": spec.slo.error_rate,
        "breach_window_s": 7,
        "min_step_pct": 3,
        "max_shift_pct": 40,
        "hysteresis_pct": 15,
        "target_utilisation": 0.6,
    }
