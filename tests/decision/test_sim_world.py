"""The simulator itself: the world must not be lenient, or every scenario would pass for nothing.

A down region fails what it is offered, load splits by the weights in effect, a write lands only
after the tier's apply latency, a restart resets the tier to its config weights, a queue builds over
capacity and raises TTFT, and the excess past the queue fails.
"""

from __future__ import annotations

import random

import pytest

from drctl.simulation import faults
from drctl.simulation.faults import Fault
from drctl.simulation.observe import Observer
from drctl.simulation.scenarios import FAMILIES, PLANNED_UTILISATION, generate, largest_remainder
from drctl.simulation.world import MAX_QUEUE_S, GlobalTier, Region, Replica, World


def _world(load_rps: float = 20.0, weights: dict[str, int] | None = None, replicas: int = 2) -> World:
    weights = weights or {"a": 60, "b": 40}
    regions = {
        n: Region(n, w, per_replica_rps=10.0, replicas=[Replica(f"{n}-{i}") for i in range(replicas)])
        for n, w in weights.items()
    }
    return World(regions, GlobalTier(dict(weights), apply_latency_s=2.0), load_rps, ["v1", "v2", "v3"])


def _steps(world: World, seconds: int, fault_list: list[Fault] | None = None) -> None:
    for _ in range(seconds):
        faults.advance(world, fault_list or [], world.now_s + 1, world.load_rps)
        world.step(1.0)


def test_load_splits_by_the_weights_in_effect_and_a_healthy_world_fails_nothing() -> None:
    world = _world(load_rps=20.0)
    _steps(world, 5)
    assert world.regions["a"].offered_rps == pytest.approx(12.0)
    assert world.regions["b"].offered_rps == pytest.approx(8.0)
    assert world.failed_total == 0 and world.offered_total == pytest.approx(100.0)


def test_a_down_region_fails_every_request_it_is_offered_until_the_weights_leave_it() -> None:
    world = _world(load_rps=20.0)
    _steps(world, 3, [Fault("down", 0, None, "a")])
    a = world.regions["a"]
    assert a.failed_rps == pytest.approx(12.0) and a.served_rps == 0
    assert world.dead() == {"a"} and world.step_error_share() == pytest.approx(0.6)
    assert world.tier.write({"a": 0, "b": 100}, world.now_s)
    _steps(world, 1)
    assert world.regions["a"].offered_rps == pytest.approx(12.0), "a write lands only after apply latency"
    _steps(world, 2)
    assert world.regions["a"].offered_rps == 0 and world.step_error_share() == 0


def test_a_region_back_from_down_loads_its_model_before_it_serves() -> None:
    world = _world()
    world.regions["a"].model_load_s = 10.0
    fault_list = [Fault("down", 0, 5, "a")]
    _steps(world, 8, fault_list)
    a = world.regions["a"]
    assert a.gateway_up and a.loading == 2 and a.failed_rps == pytest.approx(a.offered_rps)
    _steps(world, 10, fault_list)
    assert a.loading == 0 and a.failed_rps == 0 and a.served_rps > 0


def test_a_restart_resets_the_tier_to_its_config_weights_and_loses_writes_in_flight() -> None:
    tier = GlobalTier({"a": 60, "b": 40}, apply_latency_s=1.0)
    tier.write({"a": 0, "b": 100}, 0.0)
    tier.step(1.0)
    assert tier.in_effect == {"a": 0, "b": 100}
    tier.write({"a": 10, "b": 90}, 2.0)
    tier.restart(2.5, down_s=3.0)
    tier.step(5.0)
    assert tier.in_effect == {"a": 60, "b": 40}
    assert tier.read(4.0) is None and tier.read(5.5) == {"a": 60, "b": 40}
    assert not tier.write({"a": 0, "b": 100}, 4.0), "a write to a restarting tier fails"


def test_all_zero_weights_split_the_load_evenly_as_an_all_unhealthy_record_set_answers_all() -> None:
    tier = GlobalTier({"a": 0, "b": 0})
    assert tier.shares() == {"a": 0.5, "b": 0.5}


def test_utilisation_queues_and_raises_ttft_and_the_excess_past_the_queue_fails() -> None:
    light, busy, over = _world(load_rps=5.0), _world(load_rps=30.0), _world(load_rps=60.0)
    for w in (light, busy, over):
        _steps(w, 10)
    # a: 2 replicas x 10 rps = 20 rps; it is offered 3, 18 and 36 rps.
    assert light.regions["a"].ttft_ms < busy.regions["a"].ttft_ms < over.regions["a"].ttft_ms
    assert light.regions["a"].queue == busy.regions["a"].queue == 0
    a = over.regions["a"]
    assert a.queue == pytest.approx(20.0 * MAX_QUEUE_S) and a.ttft_ms > 2000
    assert a.failed_rps == pytest.approx(36.0 - 20.0) and a.served_rps == pytest.approx(20.0)


def test_slow_erroring_and_lost_replicas_do_what_they_say() -> None:
    world = _world(load_rps=10.0)
    base = None
    _steps(world, 2)
    base = world.regions["a"].ttft_ms
    fault_list = [
        Fault("slow", 2, None, "a", {"factor": 10.0}),
        Fault("errors", 2, None, "b", {"p": 0.5}),
    ]
    _steps(world, 2, fault_list)
    assert world.regions["a"].ttft_ms == pytest.approx(base * 10, rel=0.01)
    assert world.regions["b"].failed_rps == pytest.approx(world.regions["b"].offered_rps * 0.5)
    lossy = _world(load_rps=10.0)
    _steps(lossy, 2, [Fault("capacity_loss", 0, None, "a", {"replicas": 1})])
    assert lossy.regions["a"].capacity_rps == 10.0 and len(lossy.regions["a"].ready) == 1


def test_a_flapping_replica_fails_what_it_is_sent_on_its_cycle_and_serves_between() -> None:
    world = _world(load_rps=10.0)
    fault_list = [Fault("flapping", 0, None, "a", {"replicas": 1, "down_s": 3.0, "up_s": 2.0})]
    failing = []
    for _ in range(10):
        _steps(world, 1, fault_list)
        failing.append(world.regions["a"].failed_rps > 0)
    # One of a's two replicas fails its half of a's share on 3 seconds of every 5.
    assert failing == [True, True, True, False, False] * 2
    assert world.failed_total == pytest.approx(6 * 6.0 * 0.5)


def test_the_observation_sees_a_partitioned_vantage_vote_down_and_is_repeatable_from_its_seed() -> None:
    def observe(seed: int) -> str:
        world = _world()
        world.partitioned.add("v2")
        observer = Observer(random.Random(seed))
        _steps(world, 1)
        observer.record(world, 1.0)
        return observer.evidence(world, None, []).model_dump_json()

    assert observe(7) == observe(7)
    world = _world()
    _steps(world, 3, [Fault("partition", 0, None, None, {"vantage": "v2"}), Fault("down", 0, None, "b")])
    observer = Observer(random.Random(1))
    observer.settings.vote_unknown_p = observer.settings.missed_probe_p = 0.0
    observer.record(world, 1.0)
    evidence = observer.evidence(world, None, [])
    assert evidence.regions["a"].votes == {"v1": "up", "v2": "down", "v3": "up"}
    assert set(evidence.regions["b"].votes.values()) == {"down"}
    probe = evidence.regions["b"].probe
    assert probe is not None and not probe.answered and probe.completions_ok == 0


def test_largest_remainder_sums_to_100() -> None:
    assert largest_remainder({"a": 1.0, "b": 1.0, "c": 1.0}) == {"a": 34, "b": 33, "c": 33}


@pytest.mark.parametrize("family", FAMILIES)
def test_scenarios_are_a_pure_function_of_seed_and_family(family: str) -> None:
    sizes = set()
    for seed in range(20):
        s = generate(seed, family)
        assert s == generate(seed, family)
        assert sum(s.home_weights.values()) == 100 and 2 <= len(s.regions) <= 5
        sizes.add(len(s.regions))
        # At home weights every region starts within its usable capacity: the world begins at rest.
        for r in s.regions:
            assert s.load_rps * r.home_weight / 100 <= r.capacity_rps * PLANNED_UTILISATION
    assert sizes == {2, 3, 4, 5}
    with pytest.raises(ValueError, match="unknown scenario family 'meteor'"):
        generate(1, "meteor")


def test_users_ttft_is_the_slowest_region_that_serves_more_than_one_percent_of_them() -> None:
    world = _world(load_rps=10.0, weights={"a": 90, "b": 10})
    _steps(world, 2, [Fault("slow", 0, None, "b", {"factor": 20.0})])
    assert world.user_ttft_ms() == pytest.approx(world.regions["b"].ttft_ms)
    assert world.regions["b"].ttft_ms > 10 * world.regions["a"].ttft_ms
