"""The decision core in 320 simulated worlds: every fault family, 2 to 5 regions, 32 seeds each.

Each world runs with the core's `decide`; the loop asserts drctl.decision.invariants after every
decision and fails with the seed, the family and the command that replays the world. On top of the
invariants (which trust the core's own verdicts), the outcome is checked against the world's truth:
no weight stays on a region that cannot serve for longer than the RTO target, none is left there at
the end, a partitioned vantage point or a fleet-wide overload moves nothing that should not move,
and, family by family, users see no more errors than under the plain interval x threshold policy.
"""

from __future__ import annotations

import statistics
from functools import cache

import pytest

from drctl.decision.evidence import Verdict
from drctl.simulation.report import Metrics
from drctl.simulation.run import RunResult, decision_config, run
from drctl.simulation.scenarios import FAMILIES, generate

SEEDS = range(32)  # x 10 families: 320 worlds


@cache
def _core(seed: int, family: str) -> RunResult:
    return run(generate(seed, family), "core")


def _metrics(result: RunResult) -> Metrics:
    assert result.metrics is not None
    return result.metrics


def _moved(result: RunResult, action: str) -> list[float]:
    return [t.t_s for t in result.ticks if t.decision.action == action and t.written]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_the_core_keeps_every_invariant_and_drains_a_dead_region_within_the_rto(
    family: str, seed: int
) -> None:
    result = _core(seed, family)  # raises InvariantViolated, naming seed and family, at the first break
    m = _metrics(result)
    scenario = result.scenario
    rto = decision_config(scenario).rto_target_s
    # The longest stretch counts one still running at the end: a region never drained fails this.
    if m.safe_s is not None:
        assert m.safe_s <= rto, (
            f"a dead region kept weight {m.safe_s:g} s > RTO {rto:g} s: {scenario.describe()}"
        )
    # Some tick of every world decided, and the world's users were offered load throughout.
    assert result.ticks and result.samples[-1].t_s == scenario.duration_s - 1


def test_the_families_are_what_they_say() -> None:
    """The faults bite: dead regions where the family kills, none where it does not."""
    died = {f: sum(_metrics(_core(s, f)).safe_s is not None for s in SEEDS) for f in FAMILIES}
    assert died["down"] == died["cascade"] == len(SEEDS)
    assert died["capacity_loss"] == died["loading"] == died["saturated"] == 0
    assert 0 < died["partition"] < len(SEEDS)
    sizes = {len(_core(s, f).scenario.regions) for f in FAMILIES for s in SEEDS}
    assert sizes == {2, 3, 4, 5}
    # A fleet-wide overload fails users' requests whatever any policy does.
    assert min(_metrics(_core(s, "saturated")).user_error_share for s in SEEDS) > 0


def test_a_partitioned_vantage_alone_moves_nothing() -> None:
    alone = [_core(s, "partition") for s in SEEDS]
    alone = [r for r in alone if not any(f.kind == "down" for f in r.scenario.faults)]
    assert len(alone) >= len(SEEDS) // 4
    for result in alone:
        m = _metrics(result)
        assert m.moves == 0 and m.user_error_share == 0, result.scenario.describe()


@pytest.mark.parametrize("family", ["capacity_loss", "saturated"])
def test_a_region_that_still_serves_is_never_failed_over(family: str) -> None:
    """Lost replicas or an overload make a region SATURATED: its excess is shed, it is not emptied."""
    emptied = [s for s in SEEDS if _moved(_core(s, family), "failover")]
    assert emptied == [], f"{family}: failed over in seeds {emptied}"
    # All saturated: no region can take another's excess, so nothing moves at all.
    if family == "saturated":
        assert all(_metrics(_core(s, family)).moves == 0 for s in SEEDS)


# The loading and saturated worlds found the core judging a region over capacity with every replica
# ready or loading DOWN, and failing it over (fixed in the core's verdict, commit 135a862).
@pytest.mark.parametrize("family", ["capacity_loss", "loading", "saturated"])
def test_a_region_that_still_serves_is_never_judged_down(family: str) -> None:
    """No region dies in these families (see above): a verdict of DOWN is a false outage."""
    judged_down = [
        s for s in SEEDS if any(Verdict.DOWN in t.decision.verdicts.values() for t in _core(s, family).ticks)
    ]
    assert judged_down == [], f"{family}: DOWN in seeds {judged_down}"


@pytest.mark.parametrize("family", FAMILIES)
def test_users_see_no_more_errors_than_under_the_plain_threshold_policy(family: str) -> None:
    core = [_metrics(_core(s, family)).user_error_share for s in SEEDS]
    base = [_metrics(run(generate(s, family), "baseline")).user_error_share for s in SEEDS]
    assert statistics.mean(core) <= statistics.mean(base), (
        family,
        statistics.mean(core),
        statistics.mean(base),
    )


def test_a_restarted_global_tier_is_reconciled_while_the_baseline_leaves_the_config_weights() -> None:
    reconciled = 0
    for seed in SEEDS:
        result = _core(seed, "tier_restart")
        restart = next(f.start_s for f in result.scenario.faults if f.kind == "tier_restart")
        moved = _moved(result, "reconcile")
        reconciled += bool(moved)
        base = run(result.scenario, "baseline")
        if any(f.kind == "down" for f in result.scenario.faults):
            assert moved and moved[0] > restart, result.scenario.describe()
            assert _metrics(base).never_safe, "the plain policy does not look back at the tier"
    assert reconciled >= len(SEEDS) // 2


# Worlds past the fixed seeds where a wider sweep (bench/decisions.py --first-seed 1000) found the
# core, or an invariant, at fault: each fixed in the model and kept here as a regression.
FOUND = [
    # retreat_within_one_tick held a retreat (rule 'retreat', action 'return') to the return rule, so a
    # missed probe on a region given its share back was a violation; the invariant judges steps only.
    pytest.param("down", 1198),
    pytest.param("capacity_loss", 1335),
    # After a tier restart, reconcile re-asserted the last applied weights and the capacity invariant
    # judged it with loads read across the restart (two weightings mixed: eu-west-1 "usable 24.8"
    # points, not the 36 it carried); the loads' steadiness is evidence now, for the core and the check.
    pytest.param("tier_restart", 1170),
    # rules/shed.py raised KeyError on a receiver at t=150 s (fixed in the core).
    pytest.param("saturated", 1058),
]


@pytest.mark.parametrize(("family", "seed"), FOUND)
def test_worlds_found_by_wider_sweeps(family: str, seed: int) -> None:
    result = run(generate(seed, family), "core")
    m = _metrics(result)
    assert m.safe_s is None or m.safe_s <= decision_config(result.scenario).rto_target_s
