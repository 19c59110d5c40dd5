"""The simulation loop: the world steps each simulated second, a policy decides every tick.

After every decision of a checked policy (the core) the invariants of drctl.decision.invariants run,
on the decision and on the trace so far. A violation raises `InvariantViolated`, whose message names
the seed and family and the command that replays the world.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from drctl.decision.config import DecisionConfig
from drctl.decision.decision import Decision
from drctl.decision.evidence import FleetEvidence, Operation, OperationKind
from drctl.decision.invariants import OVER_TRACE, check_decision
from drctl.simulation import faults
from drctl.simulation.observe import Observer, at
from drctl.simulation.policies import BaselinePolicy, CorePolicy, Policy
from drctl.simulation.report import Metrics, Sample, measure
from drctl.simulation.scenarios import Scenario
from drctl.simulation.world import GlobalTier, Region, Replica, World

STEP_S = 1.0  # the world's resolution; every fault and tick time is a whole second
URGENT_TICK_S = 2.0  # the next tick after an urgent decision (the monitor's fast confirm)
_OPERATION: dict[str, OperationKind] = {
    "failover": "failover",
    "failback": "failback",
    "return": "return",
    "shed": "rebalance",
}


class InvariantViolated(AssertionError):
    """A checked policy broke an invariant; the message says how to replay the world."""

    def __init__(self, message: str, result: RunResult) -> None:
        super().__init__(message)
        self.result = result  # the run up to and including the violating decision


@dataclass(frozen=True)
class Tick:
    """One decision in its world: when, what was seen and decided, and what users saw since the last."""

    t_s: float
    evidence: FleetEvidence
    decision: Decision
    written: bool
    error_share: float


@dataclass
class RunResult:
    scenario: Scenario
    policy: str
    ticks: list[Tick] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    metrics: Metrics | None = None


def decision_config(scenario: Scenario) -> DecisionConfig:
    """The core's settings for the scenario: defaults but for the monitor's interval, threshold, quorum."""
    return DecisionConfig(
        interval_s=scenario.interval_s, failure_threshold=scenario.failure_threshold, quorum=scenario.quorum
    )


def build_world(scenario: Scenario) -> World:
    regions = {
        r.name: Region(
            name=r.name,
            home_weight=r.home_weight,
            per_replica_rps=r.per_replica_rps,
            replicas=[Replica(f"{r.name}-{i}") for i in range(r.replicas)],
            base_ttft_ms=r.base_ttft_ms,
            model_load_s=r.model_load_s,
        )
        for r in scenario.regions
    }
    tier = GlobalTier(config_weights=scenario.home_weights, apply_latency_s=scenario.apply_latency_s)
    return World(
        regions=regions,
        tier=tier,
        load_rps=scenario.load_rps,
        vantages=list(scenario.vantages),
        rng=random.Random(f"world/{scenario.family}/{scenario.seed}"),
    )


def make_policy(name: str, scenario: Scenario) -> Policy:
    if name == "core":
        return CorePolicy(decision_config(scenario))
    if name == "baseline":
        return BaselinePolicy(threshold=scenario.failure_threshold)
    raise ValueError(f"unknown policy {name!r}; known: core, baseline")


def _replay(scenario: Scenario, policy: str) -> str:
    return (
        f"seed {scenario.seed} family {scenario.family} ({policy}); replay: "
        f"python -m drctl.simulation --seed {scenario.seed} --family {scenario.family} --policy {policy}"
    )


def run(scenario: Scenario, policy: str | Policy = "core") -> RunResult:
    """Run `scenario` with the policy (or its name); raises InvariantViolated if a checked policy
    breaks an invariant."""
    config = decision_config(scenario)
    if isinstance(policy, str):
        policy = make_policy(policy, scenario)
    policy_name = policy.name
    world = build_world(scenario)
    observer = Observer(random.Random(f"observe/{scenario.family}/{scenario.seed}"))
    result = RunResult(scenario, policy_name)
    applied: dict[str, int] | None = None
    operations: list[Operation] = []
    moves = 0
    next_tick_s = scenario.interval_s
    tick_offered = tick_failed = 0.0
    while world.now_s < scenario.duration_s:
        faults.advance(world, list(scenario.faults), world.now_s + STEP_S, scenario.load_rps)
        world.step(STEP_S)
        observer.record(world, STEP_S)
        offered = sum(r.offered_rps for r in world.regions.values())
        failed = sum(r.failed_rps for r in world.regions.values())
        tick_offered, tick_failed = tick_offered + offered, tick_failed + failed
        result.samples.append(
            Sample(
                t_s=world.now_s - STEP_S,
                in_effect=dict(world.tier.in_effect),
                dead=frozenset(world.dead()),
                error_share=world.step_error_share(),
                ttft_p99_ms=world.user_ttft_ms() * observer.settings.p99_over_mean,
            )
        )
        if world.now_s < next_tick_s:
            continue
        now = at(world.now_s)
        evidence = observer.evidence(world, applied, operations)
        try:
            decision = policy.decide(evidence, now)
        except Exception as exc:
            exc.add_note(f"at t={world.now_s:g}s: {_replay(scenario, policy_name)}")
            raise
        written = False
        # Only an ordered move is written: a hold leaves the tier as it is, drifted or not.
        if decision.moves and not decision.advisory:
            written = world.tier.write(decision.weights_after, world.now_s)
            if written:
                applied, moves = dict(decision.weights_after), moves + 1
            else:
                policy.apply_failed(now)
        kind = _OPERATION.get(decision.action)
        if kind is not None and written:
            # One operation in flight at a time, as the monitor runs them; a hold ends it.
            change = {r: w - decision.weights_before.get(r, 0) for r, w in decision.weights_after.items()}
            source, target = min(change, key=lambda r: change[r]), max(change, key=lambda r: change[r])
            operations = [Operation(kind=kind, source=source, target=target, started_at=now)]
        elif decision.action == "hold":
            operations = []
        share = tick_failed / tick_offered if tick_offered > 0 else 0.0
        result.ticks.append(Tick(world.now_s, evidence, decision, written, share))
        tick_offered = tick_failed = 0.0
        if policy.checked:
            _check(result, config, policy_name)
        next_tick_s = world.now_s + (URGENT_TICK_S if decision.urgent else scenario.interval_s)
    result.metrics = measure(
        result.samples,
        scenario.fault_start_s,
        world.offered_total,
        world.failed_total,
        moves,
        config.slo_ttft_p99_ms,
        config.slo_error_rate,
    )
    return result


def _check(result: RunResult, config: DecisionConfig, policy: str) -> None:
    last = result.ticks[-1]
    found = check_decision(last.evidence, last.decision, config)
    # The trace checks see the whole trace at every tick (the per-decision ones ran at each tick).
    steps = [(t.evidence, t.decision) for t in result.ticks]
    found += [v for check in OVER_TRACE for v in check(steps, config)]
    if found:
        detail = "; ".join(f"{v.name}: {v.detail}" for v in found)
        raise InvariantViolated(
            f"at t={last.t_s:g}s: {detail}\n{_replay(result.scenario, policy)}\n{result.scenario.describe()}",
            result,
        )
