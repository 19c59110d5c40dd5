"""A monitor's failover places the failed region's share as the decision core does: over every
healthy region, by headroom where capacity is known (issue 26: three regions, the dead region's
share no longer goes whole to the survivor with the least room)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from drctl.models.capacity import RegionCapacity
from drctl.models.failover import FailoverInput, plan_failover
from drctl.models.health import RegionState
from drctl.models.monitor import MonitorState, RegionTracker
from drctl.models.rebalance import weight_points
from tests.support.config import cap, spec
from workflows.failover_phases import placed
from workflows.monitor_actions import receivers_for

THREE = spec([("us-west-1", 50, 2), ("us-east-1", 30, 2), ("eu-west-1", 20, 2)])


def _cap(region: str, ready: int, load: float, *, per: float = 10.0, known: bool = True) -> RegionCapacity:
    usable = ready * per * 0.8
    return RegionCapacity(
        region=region,
        capacity=ready * per,
        load=load,
        usable=usable,
        headroom=usable - load,
        unit="concurrency",
        per_replica=per,
        source="configured",
        known=known,
        ready_replicas=ready,
        desired_replicas=2,
    )


def test_weight_points_weigh_a_point_by_the_load_the_known_regions_carry() -> None:
    # The case: us-west-1 lost one of two replicas (usable 8), the others have two (usable 16).
    # 40 streams over 100 points: a point brings 0.4 streams.
    caps = {
        "us-west-1": _cap("us-west-1", 1, 13.6),
        "us-east-1": _cap("us-east-1", 2, 15.2),
        "eu-west-1": _cap("eu-west-1", 2, 11.2),
    }
    points = weight_points(caps, {"us-west-1": 34, "us-east-1": 38, "eu-west-1": 28})
    assert {r: round(p, 6) for r, p in points.items()} == {
        "us-west-1": 20.0,
        "us-east-1": 40.0,
        "eu-west-1": 40.0,
    }


def test_weight_points_are_unknown_on_an_idle_fleet_or_without_a_known_region() -> None:
    idle = {"a": _cap("a", 2, 0.0), "b": _cap("b", 2, 0.0)}
    assert weight_points(idle, {"a": 60, "b": 40}) == {}
    unknown = {"a": _cap("a", 2, 5.0, known=False)}
    assert weight_points(unknown, {"a": 100}) == {}
    # A known region with no share carries no load that says what a point weighs, but has points.
    caps = {"a": _cap("a", 2, 8.0), "b": _cap("b", 2, 0.0)}
    assert weight_points(caps, {"a": 100, "b": 0}) == {"a": 200.0, "b": 200.0}


def _inp(**over: object) -> FailoverInput:
    base: dict[str, object] = {"spec": THREE, "target": "us-west-1", "source": "us-east-1", "emergency": True}
    return FailoverInput(**(base | over))


def test_the_dead_regions_share_goes_by_headroom_not_whole_to_one_survivor() -> None:
    weights = {"us-west-1": 34, "us-east-1": 38, "eu-west-1": 28}
    points = {"us-west-1": 20.0, "us-east-1": 40.0, "eu-west-1": 40.0}
    after = placed(_inp(receivers=["us-west-1", "eu-west-1"], capacity_points=points), weights)
    # Headroom: us-west-1 has none (34 > 20), eu-west-1 has 12: past every receiver's headroom, the
    # share evens out to one fraction of capacity without lowering anyone: us-west-1 keeps its 34.
    assert after == {"us-west-1": 34, "us-east-1": 0, "eu-west-1": 66}
    plan = plan_failover(
        THREE,
        weights,
        "us-west-1",
        "us-east-1",
        cap("us-west-1", 1),
        emergency=True,
        force=False,
        after=after,
    )
    assert plan.weights_after == after and plan.source == "us-east-1"


def test_within_headroom_each_receiver_takes_in_proportion_to_its_room() -> None:
    weights = {"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20}
    points = {"us-west-1": 90.0, "eu-west-1": 80.0}  # room 40 and 60: 30 points go 12 and 18
    after = placed(_inp(receivers=["us-west-1", "eu-west-1"], capacity_points=points), weights)
    assert after == {"us-west-1": 62, "us-east-1": 0, "eu-west-1": 38}


def test_without_capacity_figures_the_share_goes_by_configured_weight() -> None:
    weights = {"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20}
    after = placed(_inp(receivers=["us-west-1", "eu-west-1"]), weights)
    # 30 points, 50:20 -> 21.4 and 8.6.
    assert after == {"us-west-1": 71, "us-east-1": 0, "eu-west-1": 29}


def test_an_operators_failover_or_a_source_without_share_places_nothing() -> None:
    weights = {"us-west-1": 50, "us-east-1": 30, "eu-west-1": 20}
    assert placed(_inp(), weights) is None  # no receivers: all onto --to
    assert placed(_inp(receivers=["eu-west-1"]), weights) is None  # the target must be a receiver
    assert placed(_inp(receivers=["us-west-1", "eu-west-1"]), {**weights, "us-east-1": 0}) is None
    # The source among the receivers is ignored.
    got = placed(_inp(receivers=["us-west-1", "us-east-1"]), weights)
    assert got == {"us-west-1": 80, "us-east-1": 0, "eu-west-1": 20}


def _state(states: dict[str, RegionState], **over: object) -> MonitorState:
    trackers = {r: RegionTracker(region=r, state=st) for r, st in states.items()}
    return MonitorState(spec=THREE, policy="automatic", trackers=trackers, **over)


def test_receivers_are_the_healthy_resolved_regions_not_recently_failed() -> None:
    H, U, S, R = RegionState.HEALTHY, RegionState.UNHEALTHY, RegionState.SUSPECT, RegionState.RECOVERING
    s = _state({"us-west-1": H, "us-east-1": U, "eu-west-1": H})
    assert receivers_for(s, "us-east-1", "us-west-1") == ["eu-west-1", "us-west-1"]
    # SUSPECT or RECOVERING regions never receive; unresolved ones neither.
    assert receivers_for(
        _state({"us-west-1": H, "us-east-1": U, "eu-west-1": S}), "us-east-1", "us-west-1"
    ) == ["us-west-1"]
    s = _state({"us-west-1": H, "us-east-1": U, "eu-west-1": H}, unresolved={"eu-west-1": "no such region"})
    assert receivers_for(s, "us-east-1", "us-west-1") == ["us-west-1"]
    # A region a failover just failed on is avoided, unless it is the target chosen anyway.
    until = datetime.now(UTC) + timedelta(minutes=5)
    s = _state({"us-west-1": H, "us-east-1": U, "eu-west-1": H}, avoid_targets={"eu-west-1": until})
    assert receivers_for(s, "us-east-1", "us-west-1") == ["us-west-1"]
    assert receivers_for(s, "us-east-1", "eu-west-1") == ["eu-west-1", "us-west-1"]
    # A RECOVERING target chosen because nothing else can serve takes the share alone.
    s = _state({"us-west-1": R, "us-east-1": U, "eu-west-1": U})
    assert receivers_for(s, "us-east-1", "us-west-1") == ["us-west-1"]
