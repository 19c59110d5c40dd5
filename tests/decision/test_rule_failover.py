"""Rule `failover`: a DOWN region's whole share leaves at once, spread by headroom."""

from __future__ import annotations

from drctl.decision import DecisionConfig, Operation, Verdict
from drctl.decision.rules.failover import failover
from tests.decision.facts import T0, at, capacity, dead, fleet, region, remembered, tick_of

CFG = DecisionConfig(interval_s=10)
DOWN = {"verdict": Verdict.DOWN, "since": T0, "consecutive_failures": 3}


def three(east_probe=None, west_cap=None, eu_cap=None, **kw):  # type: ignore[no-untyped-def]
    return fleet(
        [
            region("us-west-1", 50, capacity=west_cap or capacity(ready=2, load=16.0)),
            region("us-east-1", 30, probe=east_probe or dead(), capacity=capacity(ready=0, load=0.0)),
            region("eu-west-1", 20, capacity=eu_cap or capacity(ready=2, load=8.0)),
        ],
        {"us-west-1": 40, "us-east-1": 40, "eu-west-1": 20},
        **kw,
    )


def test_no_down_region_does_not_fire() -> None:
    notes: list[str] = []
    ev = three(east_probe=region("x", 1).probe)
    assert failover(tick_of(ev, CFG, at(0)), notes) is None
    assert notes == []


def test_a_down_region_with_no_share_does_not_fire() -> None:
    ev = three().model_copy(update={"weights_in_effect": {"us-west-1": 60, "us-east-1": 0, "eu-west-1": 40}})
    ev = ev.model_copy(update={"weights_applied": ev.weights_in_effect})
    assert failover(tick_of(ev, CFG, at(10), remembered(**{"us-east-1": DOWN})), []) is None


def test_share_goes_by_headroom() -> None:
    # 16 load on 60 points: 0.4 a point; usable 16 each = 40 points; west has 0 room... no: 40 - 40.
    ev = three(west_cap=capacity(ready=3, load=16.0), eu_cap=capacity(ready=2, load=8.0))
    out = failover(tick_of(ev, CFG, at(10), remembered(**{"us-east-1": DOWN})), [])
    assert out is not None
    # usable: west 24 / 0.4 = 60 points (room 20), eu 16 / 0.4 = 40 points (room 20): 40 splits evenly.
    assert out.weights == {"us-west-1": 60, "us-east-1": 0, "eu-west-1": 40}
    assert (out.action, out.rule, out.urgent, out.advisory) == ("failover", "failover", True, False)
    assert out.region_updates == {"us-east-1": {"emptied_by": "failover", "last_step_pct": 0}}
    assert out.reasons[0].startswith(
        "failover: us-east-1 (40) DOWN; share to eu-west-1, us-west-1 by headroom"
    )


def test_uneven_headroom_is_proportional() -> None:
    ev = three(west_cap=capacity(ready=4, load=16.0), eu_cap=capacity(ready=2, load=8.0))
    out = failover(tick_of(ev, CFG, at(10), remembered(**{"us-east-1": DOWN})), [])
    assert out is not None
    # west 32/0.4 = 80 points (room 40), eu 40 points (room 20): 40 splits 2:1.
    assert out.weights == {"us-west-1": 67, "us-east-1": 0, "eu-west-1": 33}


def test_not_beyond_capacity_while_another_has_room() -> None:
    # The three-region case: west with one replica already over its capacity.
    ev = fleet(
        [
            region("us-west-1", 50, capacity=capacity(ready=1, load=13.6)),
            region("us-east-1", 30, probe=dead(), capacity=capacity(ready=2, load=15.2)),
            region("eu-west-1", 20, capacity=capacity(ready=2, load=11.2)),
        ],
        {"us-west-1": 34, "us-east-1": 38, "eu-west-1": 28},
    )
    out = failover(tick_of(ev, CFG, at(30), remembered(**{"us-east-1": DOWN})), [])
    assert out is not None
    assert out.weights != {"us-west-1": 72, "us-east-1": 0, "eu-west-1": 28}
    assert out.weights == {"us-west-1": 34, "us-east-1": 0, "eu-west-1": 66}
    assert "share to eu-west-1 past their headroom (12), evenly by capacity: " in out.reasons[0]


def test_without_figures_by_home_weight() -> None:
    ev = three(west_cap=capacity(per_replica=None), eu_cap=capacity(per_replica=None))
    out = failover(tick_of(ev, CFG, at(10), remembered(**{"us-east-1": DOWN})), [])
    assert out is not None
    # 40 points by home weights 50:20.
    assert out.weights == {"us-west-1": 69, "us-east-1": 0, "eu-west-1": 31}
    assert "eu-west-1, us-west-1 by home weight, within known capacity: " in out.reasons[0]


def test_never_onto_a_region_that_is_not_healthy() -> None:
    mem = remembered(
        **{"us-east-1": DOWN, "eu-west-1": {"verdict": Verdict.RECOVERING, "consecutive_failures": 0}}
    )
    ev = three()
    ev.regions["eu-west-1"].probe = ev.regions["us-west-1"].probe
    out = failover(tick_of(ev, CFG, at(10), mem), [])
    assert out is not None
    assert out.weights == {"us-west-1": 80, "us-east-1": 0, "eu-west-1": 20}


def test_no_receiver_holds_and_says_so() -> None:
    ev = fleet(
        [region("a", 50, probe=dead()), region("b", 50, probe=dead())],
        {"a": 50, "b": 50},
    )
    notes: list[str] = []
    out = failover(tick_of(ev, CFG, at(30), remembered(a=DOWN, b=DOWN)), notes)
    assert out is not None
    assert (out.action, out.weights, out.urgent) == ("hold", {"a": 50, "b": 50}, True)
    assert out.reasons == ["failover: a (50), b (50) DOWN but no region can receive; holding"]


def test_onto_saturated_when_all_serving_are_saturated() -> None:
    ev = three(west_cap=capacity(ready=2, load=30.0), eu_cap=capacity(ready=2, load=17.0))
    out = failover(tick_of(ev, CFG, at(10), remembered(**{"us-east-1": DOWN})), [])
    assert out is not None
    assert out.weights["us-east-1"] == 0
    assert out.weights["us-west-1"] > 40 and out.weights["eu-west-1"] > 20


def test_supersedes_failback_return_and_rebalance_but_not_drills() -> None:
    ops = [
        Operation(kind=k, started_at=T0)
        for k in ("failback", "return", "rebalance", "break_glass", "maintenance")
    ]
    out = failover(tick_of(three(operations=ops), CFG, at(10), remembered(**{"us-east-1": DOWN})), [])
    assert out is not None
    assert out.superseded == ["failback", "return", "rebalance", "maintenance"]


def test_policy_manual_advises() -> None:
    cfg = CFG.model_copy(update={"policy": "manual"})
    out = failover(tick_of(three(), cfg, at(10), remembered(**{"us-east-1": DOWN})), [])
    assert out is not None
    assert out.advisory is True
    assert out.reasons[0].endswith("(policy manual: advised, not applied)")
