"""The monitor's rebalance decision (drctl/models/rebalance_decision.py): one test per rule it
applies on top of `plan_rebalance`, each driven tick by tick in simulated time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from drctl.config.capacity import RebalanceLimits
from drctl.models.capacity import BreachState, RegionSignals
from drctl.models.fleet_spec import FleetSpec
from drctl.models.rebalance import RebalanceMemory
from drctl.models.rebalance_decision import (
    ALL_WITHIN,
    MAX_DRAIN_MS,
    RebalanceTick,
    RebalanceVerdict,
    after_step,
    backdated,
    decide_rebalance,
    observed,
    passive_ttft_breaches,
)
from tests.support.config import spec as make_spec

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
HOME = {"a": 60, "b": 40}


def _spec(**limits: float) -> FleetSpec:
    s = make_spec([("a", 60, 2), ("b", 40, 2)])
    lim = RebalanceLimits(breach_window_s=2, shed_step_interval_s=5, return_stable_s=30, **limits)
    return s.model_copy(
        update={"rebalance": "automatic", "max_concurrency_per_replica": 4, "rebalance_limits": lim}
    )


SPEC = _spec()


def _sig(
    region: str, running: float = 2.0, *, ready: int = 2, ttft: float | None = 100.0, **kw: float
) -> RegionSignals:
    return RegionSignals(
        region=region,
        ready_replicas=ready,
        desired_replicas=ready,
        running=running,
        waiting=kw.pop("waiting", 0.0),
        ttft_p99_ms=ttft,
        error_rate=kw.pop("error_rate", 0.0),
        requests=kw.pop("requests", 100.0),
        window_s=5,
        measured_at=T0,
    )


def _calm() -> dict[str, RegionSignals]:
    return {"a": _sig("a"), "b": _sig("b")}


def _slow_a(ttft: float = 900.0) -> dict[str, RegionSignals]:
    return {"a": _sig("a", ttft=ttft), "b": _sig("b")}


def _tick(
    signals: dict[str, RegionSignals], current: dict[str, int] | None = None, **kw: object
) -> RebalanceTick:
    return RebalanceTick(current=dict(current or HOME), signals=signals, **kw)  # type: ignore[arg-type]


def _run(
    ticks: list[tuple[float, RebalanceTick]], memory: RebalanceMemory | None = None, spec: FleetSpec = SPEC
) -> list[RebalanceVerdict]:
    """Decide each (seconds after T0, tick) in turn, applying every step that is not a hold."""
    mem = memory or RebalanceMemory()
    out = []
    for at, tick in ticks:
        v = decide_rebalance(tick, mem, spec, T0 + timedelta(seconds=at))
        mem = v.memory
        if v.decision.action != "hold":
            v.decision.outcome = "applied"
            mem = after_step(mem, v.decision, v.plan, v.caps, spec, T0 + timedelta(seconds=at))
        out.append(v)
    return out


def test_calm_fleet_holds_at_rest_and_the_memory_given_is_not_changed() -> None:
    mem = RebalanceMemory()
    before = mem.model_dump()
    v = decide_rebalance(_tick(_calm()), mem, SPEC, T0)
    assert v.decision.action == "hold" and v.decision.reasons == [ALL_WITHIN]
    assert v.at_rest and not v.urgent
    assert mem.model_dump() == before
    assert set(v.memory.points) == {"a", "b"}


def test_a_region_not_read_keeps_the_ticks_awake() -> None:
    v = decide_rebalance(
        _tick({"a": _sig("a")}, missing=["b: no capacity signals"]), RebalanceMemory(), SPEC, T0
    )
    assert v.decision.action == "hold" and not v.at_rest
    assert "b: no capacity signals" in v.decision.held_back


def test_a_suspect_region_keeps_the_ticks_awake() -> None:
    v = decide_rebalance(_tick(_calm(), suspects={"a": None}), RebalanceMemory(), SPEC, T0)
    assert v.decision.action == "hold" and not v.at_rest


def test_a_breach_sheds_only_once_sustained_for_the_window() -> None:
    # A TTFT under the window's length: not backdated past it, so the first reading only starts the window.
    vs = _run([(0, _tick(_slow_a(900))), (1, _tick(_slow_a(900))), (2.5, _tick(_slow_a(900)))])
    assert [v.decision.action for v in vs] == ["hold", "hold", "shed"]
    assert vs[0].urgent and not vs[0].at_rest
    assert ALL_WITHIN not in vs[0].decision.reasons
    assert any("a breaching for" in r and "of the 2 s window" in r for r in vs[0].decision.reasons)
    assert vs[2].decision.weights_after["a"] < 60


def test_a_breach_that_clears_for_one_reading_starts_its_window_again() -> None:
    vs = _run([(0, _tick(_slow_a())), (1, _tick(_calm())), (2.5, _tick(_slow_a())), (3, _tick(_slow_a()))])
    assert [v.decision.action for v in vs] == ["hold", "hold", "hold", "hold"]


def test_a_region_not_read_loses_its_window() -> None:
    only_b = _tick({"b": _sig("b")}, missing=["a: no answer"])
    vs = _run([(0, _tick(_slow_a())), (1, only_b), (2.5, _tick(_slow_a()))])
    assert [v.decision.action for v in vs] == ["hold", "hold", "hold"]
    assert "a" not in vs[1].memory.breaches.since


def test_a_ttft_as_long_as_the_window_counts_at_once() -> None:
    # Requests that waited 3 s for their first token show a breach that began 3 s ago.
    v = _run([(0, _tick(_slow_a(3000)))])[0]
    assert v.decision.action == "shed"


def test_a_suspect_regions_breach_counts_as_sustained_at_once() -> None:
    v = _run([(0, _tick(_slow_a(900), suspects={"a": None}))])[0]
    assert v.decision.action == "shed"


def test_a_suspect_regions_passive_ttft_is_a_breach_of_its_own() -> None:
    # Its replicas' histograms show nothing yet; the watcher's passive window shows 2 s.
    v = _run([(0, _tick(_calm(), suspects={"a": 2000.0}))])[0]
    assert v.decision.action == "shed"
    assert any("passive signals" in r for r in v.decision.reasons)
    assert passive_ttft_breaches({"a": 150.0, "b": None}, 200.0) == {}


def test_sheds_are_spaced_by_shed_step_interval() -> None:
    slow = _tick(_slow_a(3000))
    vs = _run([(0, slow)])
    first = vs[0]
    assert first.decision.action == "shed" and first.memory.next_shed_at is None
    mem = after_step(first.memory, first.decision, first.plan, first.caps, SPEC, T0)
    assert mem.next_shed_at == T0 + timedelta(seconds=5)
    after = first.decision.weights_after
    # Still breaching under the new weights, 4 s later (the drain restart is passed): the spacing holds it.
    mem = mem.model_copy(update={"breaches": BreachState()})
    v = decide_rebalance(_tick(_slow_a(3000), after), mem, SPEC, T0 + timedelta(seconds=4))
    assert v.decision.action == "hold" and v.urgent is False
    assert any("next shed step is due" in r for r in v.decision.reasons)
    # Not timing a breach, yet the held shed is due at the spacing's end: the next tick comes then.
    assert v.due == T0 + timedelta(seconds=5)
    v = decide_rebalance(_tick(_slow_a(3000), after), mem, SPEC, T0 + timedelta(seconds=5))
    assert v.decision.action == "shed"


def test_a_step_off_a_region_restarts_its_window_after_its_queue_drains() -> None:
    v = _run([(0, _tick(_slow_a(3000)))])[0]
    mem = after_step(v.memory, v.decision, v.plan, v.caps, SPEC, T0)
    assert mem.breaches.since["a"] == {"ttft": T0 + timedelta(milliseconds=3000)}
    # A TTFT past the cap drains for MAX_DRAIN_MS at most.
    v = _run([(0, _tick(_slow_a(60_000)))])[0]
    mem = after_step(v.memory, v.decision, v.plan, v.caps, SPEC, T0)
    assert mem.breaches.since["a"] == {"ttft": T0 + timedelta(milliseconds=MAX_DRAIN_MS)}
    # An error breach seen again before the drain ends: the reason says when its window starts.
    failing = {"a": _sig("a", ttft=3000, error_rate=0.5), "b": _sig("b")}
    v = _run([(0, _tick(failing, suspects={"a": None}))])[0]
    mem = after_step(v.memory, v.decision, v.plan, v.caps, SPEC, T0)
    assert mem.breaches.since["a"]["errors"] == T0 + timedelta(seconds=3)
    again = {"a": _sig("a", ttft=100, error_rate=0.5), "b": _sig("b")}
    later = decide_rebalance(_tick(again, v.decision.weights_after), mem, SPEC, T0 + timedelta(seconds=1))
    assert later.decision.action == "hold" and later.urgent
    assert any("its window starts at 12:00:03" in r for r in later.decision.reasons)


def test_a_return_waits_until_the_region_carried_its_share_for_return_stable_s() -> None:
    shed = _run([(0, _tick(_slow_a(3000)))])[0]
    mem = after_step(shed.memory, shed.decision, shed.plan, shed.caps, SPEC, T0)
    current = shed.decision.weights_after
    mem = mem.model_copy(update={"next_shed_at": None})
    actions = []
    for at in (10, 20, 39, 40):
        v = decide_rebalance(_tick(_calm(), current), mem, SPEC, T0 + timedelta(seconds=at))
        mem = v.memory
        actions.append(v.decision.action)
        if at == 10:
            assert any("the return is due at 12:00:40" in r for r in v.decision.reasons)
            assert v.due == T0 + timedelta(seconds=40)
    assert actions == ["hold", "hold", "hold", "return"]
    assert v.due is None  # the return went: nothing held
    # A tick that does not plan a return starts the count again.
    v = decide_rebalance(_tick(_slow_a(900), current), mem, SPEC, T0 + timedelta(seconds=41))
    assert v.memory.return_since is None


def test_a_failed_shed_backs_off_every_step_and_a_failed_return_only_returns() -> None:
    v = _run([(0, _tick(_slow_a(3000)))])[0]
    v.decision.outcome = "failed"
    mem = after_step(v.memory, v.decision, v.plan, v.caps, SPEC, T0)
    assert mem.not_before == T0 + timedelta(seconds=30) and mem.not_before_shed
    held = decide_rebalance(_tick(_slow_a(3000)), mem, SPEC, T0 + timedelta(seconds=10))
    assert held.decision.action == "hold"
    assert any("the last step failed" in r for r in held.decision.reasons)
    assert held.due == T0 + timedelta(seconds=30)
    assert (
        decide_rebalance(_tick(_slow_a(3000)), mem, SPEC, T0 + timedelta(seconds=30)).decision.action
        == "shed"
    )
    # A failed return holds returns only: a shed still goes.
    mem = mem.model_copy(update={"not_before_shed": False})
    assert (
        decide_rebalance(_tick(_slow_a(3000)), mem, SPEC, T0 + timedelta(seconds=10)).decision.action
        == "shed"
    )


def test_the_back_off_grows_with_the_interval() -> None:
    spec = SPEC.model_copy(update={"interval_s": 20})
    v = _run([(0, _tick(_slow_a(3000)))], spec=spec)[0]
    v.decision.outcome = "failed"
    assert after_step(v.memory, v.decision, v.plan, v.caps, spec, T0).not_before == T0 + timedelta(seconds=60)


def test_a_region_a_failover_emptied_receives_no_share() -> None:
    three = make_spec([("a", 50, 2), ("b", 30, 2), ("c", 20, 2)]).model_copy(
        update={
            "rebalance": "automatic",
            "max_concurrency_per_replica": 4,
            "rebalance_limits": SPEC.rebalance_limits,
        }
    )
    sig = {"a": _sig("a", ttft=3000), "b": _sig("b"), "c": _sig("c", running=0)}
    v = decide_rebalance(_tick(sig, {"a": 70, "b": 30, "c": 0}), RebalanceMemory(), three, T0)
    assert v.decision.action == "shed"
    assert v.decision.weights_after["c"] == 0 and v.decision.weights_after["b"] > 30


def test_weights_another_operation_set_are_taken_as_they_are() -> None:
    shed = _run([(0, _tick(_slow_a(3000)))])[0]
    mem = after_step(shed.memory, shed.decision, shed.plan, shed.caps, SPEC, T0)
    assert mem.moved and mem.last_set == shed.decision.weights_after
    v = decide_rebalance(_tick(_calm(), {"a": 0, "b": 100}), mem, SPEC, T0 + timedelta(seconds=60))
    assert v.decision.reasons[0] == "the weights were changed by another operation: taken as they are"
    assert v.memory.moved == {} and v.memory.last_set is None
    assert v.decision.action == "hold"


def test_a_held_step_is_recorded_with_its_thresholds_and_evidence() -> None:
    v = decide_rebalance(_tick(_slow_a(900), votes={"b": "a up"}), RebalanceMemory(), SPEC, T0)
    d = v.decision
    assert d.mode == "automatic" and d.outcome == "held" and d.votes == {"b": "a up"}
    assert d.thresholds["breach_window_s"] == 2 and set(d.evidence) == {"a", "b"}


def test_backdated_moves_only_earlier_and_only_the_kinds_named() -> None:
    state = observed(BreachState(), {"a": {"ttft": "x", "errors": "y"}}, T0)
    earlier = T0 - timedelta(seconds=3)
    out = backdated(state, {"a": earlier, "z": earlier}, kinds={"ttft"})
    assert out.since["a"] == {"ttft": earlier, "errors": T0} and "z" not in out.since
    assert backdated(state, {"a": T0 + timedelta(seconds=3)}).since["a"] == state.since["a"]
    assert state.since["a"]["ttft"] == T0  # the input is not changed


def test_a_region_with_no_usable_capacity_gets_no_share_back_however_idle_the_fleet() -> None:
    # b lost its replicas and was shed to 0; the fleet is too idle to weigh a point (no load): the
    # return must still not give share to capacity 0.
    mem = RebalanceMemory(moved={"a": 40, "b": -40}, last_set={"a": 100, "b": 0})
    idle = {"a": _sig("a", running=0, ttft=None), "b": _sig("b", running=0, ready=0, ttft=None)}
    v = decide_rebalance(_tick(idle, {"a": 100, "b": 0}), mem, SPEC, T0)
    assert v.decision.weights_after == {"a": 100, "b": 0}
    assert any("b:" in h and "carries 0.0 points" in h for h in v.decision.held_back)


def test_a_region_shed_for_slowness_takes_no_shed_share_until_its_traffic_shows_it_recovered() -> None:
    three = make_spec([("a", 40, 2), ("b", 30, 2), ("c", 30, 2)]).model_copy(
        update={
            "rebalance": "automatic",
            "max_concurrency_per_replica": 4,
            "rebalance_limits": SPEC.rebalance_limits,
        }
    )
    # c was shed to 0 for a slow TTFT: at 0 it carries nothing, so nothing shows whether it is still slow.
    mem = RebalanceMemory(moved={"a": 30, "c": -30}, last_set={"a": 70, "b": 30, "c": 0})
    sig = {"a": _sig("a", running=1), "b": _sig("b", ttft=3000), "c": _sig("c", running=0, ttft=None)}
    v = decide_rebalance(_tick(sig, {"a": 70, "b": 30, "c": 0}), mem, three, T0)
    assert v.decision.action == "shed"
    assert v.decision.weights_after["c"] == 0 and v.decision.weights_after["a"] > 70
    assert any("c: shed earlier and carries too little traffic" in h for h in v.decision.held_back)
    # Once its own traffic shows a TTFT within the objective, it takes share as any region does.
    sig["c"] = _sig("c", running=0.5)
    v = decide_rebalance(_tick(sig, {"a": 70, "b": 30, "c": 0}), mem, three, T0)
    assert v.decision.weights_after["c"] > 0


def test_a_step_held_by_several_holds_is_due_when_the_last_ends() -> None:
    shed = _run([(0, _tick(_slow_a(3000)))])[0]
    mem = after_step(shed.memory, shed.decision, shed.plan, shed.caps, SPEC, T0)
    current = shed.decision.weights_after
    # A failed return at 10 s backs returns off to 40 s; the return's own stability ends at 50 s.
    mem = mem.model_copy(
        update={"next_shed_at": None, "not_before": T0 + timedelta(seconds=40), "not_before_shed": False}
    )
    v = decide_rebalance(_tick(_calm(), current), mem, SPEC, T0 + timedelta(seconds=20))
    assert v.decision.action == "hold" and v.due == T0 + timedelta(seconds=50)
    # A calm fleet at home: nothing held, nothing due.
    assert decide_rebalance(_tick(_calm()), RebalanceMemory(), SPEC, T0).due is None
