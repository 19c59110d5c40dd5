"""Property tests: for any evidence about 2 to 5 regions, any memory and any settings, `decide`
keeps every per-decision invariant; and along random runs that apply its decisions, too."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drctl.decision import (
    CapacityFacts,
    DecisionConfig,
    DecisionMemory,
    FleetEvidence,
    PassiveFacts,
    ProbeFacts,
    RegionEvidence,
    RegionMemory,
    Verdict,
    decide,
)
from drctl.decision.invariants import check_decision
from tests.decision.facts import T0

NAMES = ["r0", "r1", "r2", "r3", "r4"]
seconds = st.floats(min_value=-120, max_value=120, allow_nan=False).map(lambda s: T0 + timedelta(seconds=s))


@st.composite
def probes(draw: st.DrawFn) -> ProbeFacts | None:
    if draw(st.booleans()) and draw(st.booleans()):
        return None
    tried = draw(st.integers(0, 3))
    failing = draw(st.lists(st.sampled_from(["p0", "p1", "p2"]), unique=True, max_size=3))
    return ProbeFacts(
        answered=draw(st.booleans()) or draw(st.booleans()),
        auth_refused=draw(st.integers(0, 9)) == 0,
        completions_tried=tried,
        completions_ok=draw(st.integers(0, tried)),
        errors=draw(st.lists(st.sampled_from(["timeout", "slow", "503", "refused"]), max_size=2)),
        ttft_ms=draw(st.none() | st.floats(0, 5000)),
        replicas_failing=failing,
        replicas_late_only=draw(st.lists(st.sampled_from(failing), unique=True)) if failing else [],
        queue_waiting=draw(st.none() | st.floats(0, 50)),
        finished_total=draw(st.none() | st.floats(0, 1000)),
        at=T0,
    )


@st.composite
def capacities(draw: st.DrawFn) -> CapacityFacts | None:
    if draw(st.integers(0, 5)) == 0:
        return None
    return CapacityFacts(
        ready=draw(st.integers(0, 4)),
        loading=draw(st.integers(0, 2)),
        desired=draw(st.integers(0, 4)),
        per_replica=draw(st.none() | st.floats(0.5, 20)),
        load=draw(st.none() | st.floats(0, 100)),
        ttft_p99_ms=draw(st.none() | st.floats(0, 2000)),
        error_rate=draw(st.none() | st.floats(0, 1)),
        waiting=draw(st.none() | st.floats(0, 50)),
    )


@st.composite
def regions(draw: st.DrawFn, name: str) -> RegionEvidence:
    passive = draw(
        st.none()
        | st.builds(
            PassiveFacts,
            error_rate=st.none() | st.floats(0, 1),
            ttft_p99_ms=st.none() | st.floats(0, 2000),
            requests=st.none() | st.floats(0, 1000),
            stalled=st.booleans(),
        )
    )
    votes = draw(
        st.dictionaries(st.sampled_from(["m", "v1", "v2"]), st.sampled_from(["up", "down", "unknown"]))
    )
    return RegionEvidence(
        name=name,
        home_weight=draw(st.integers(0, 100)),
        probe=draw(probes()),
        passive=passive,
        votes=votes,
        capacity=draw(capacities()),
    )


def weights(names: list[str]) -> st.SearchStrategy[dict[str, int] | None]:
    raw = st.lists(st.integers(0, 100), min_size=len(names), max_size=len(names)).map(
        lambda ws: dict(zip(names, ws, strict=True))
    )
    return st.none() | raw


@st.composite
def memories(draw: st.DrawFn, names: list[str]) -> DecisionMemory:
    regions_ = {}
    for n in names:
        regions_[n] = RegionMemory(
            verdict=draw(st.sampled_from(list(Verdict))),
            since=draw(st.none() | seconds),
            consecutive_failures=draw(st.integers(0, 5)),
            consecutive_successes=draw(st.integers(0, 5)),
            last_direction=draw(st.sampled_from([-1, 0, 1])),
            last_direction_change_at=draw(st.none() | seconds),
            breach_since=draw(st.none() | seconds),
            emptied_by=draw(st.sampled_from([None, "failover", "shed"])),
            last_step_pct=draw(st.integers(0, 40)),
            last_finished=draw(st.none() | st.floats(0, 1000)),
        )
    return DecisionMemory(
        regions=regions_,
        last_applied=draw(weights(names)),
        next_shed_at=draw(st.none() | seconds),
        not_before=draw(st.none() | seconds),
    )


configs = st.builds(
    DecisionConfig,
    failure_threshold=st.integers(1, 4),
    recovery_threshold=st.integers(1, 4),
    quorum=st.integers(0, 3),
    mode=st.sampled_from(["automatic", "advise", "off"]),
    policy=st.sampled_from(["automatic", "manual"]),
    stability_window_s=st.sampled_from([0.0, 30.0]),
    breach_window_s=st.sampled_from([0.0, 10.0]),
    shed_step_interval_s=st.sampled_from([0.0, 20.0]),
    return_stable_s=st.sampled_from([0.0, 30.0]),
    return_step_pct=st.integers(1, 100),
    min_step_pct=st.integers(1, 20),
    target_utilisation=st.floats(0.1, 1),
)


@st.composite
def worlds(draw: st.DrawFn) -> tuple[FleetEvidence, DecisionMemory, DecisionConfig]:
    names = NAMES[: draw(st.integers(2, 5))]
    evidence = FleetEvidence(
        at=T0,
        regions={n: draw(regions(n)) for n in names},
        weights_in_effect=draw(weights(names)),
        weights_applied=draw(weights(names)),
    )
    return evidence, draw(memories(names)), draw(configs)


FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(worlds())
def test_any_evidence_keeps_the_per_decision_invariants(world: tuple[Any, Any, Any]) -> None:
    evidence, memory, config = world
    before = (evidence.model_dump(), memory.model_dump())
    decision, new = decide(evidence, memory, config, T0)
    assert check_decision(evidence, decision, config) == []
    assert set(decision.verdicts) == set(evidence.regions)
    assert new.decisions == memory.decisions + 1
    assert (evidence.model_dump(), memory.model_dump()) == before


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_runs_that_apply_each_decision_keep_them(data: st.DataObject) -> None:
    evidence, memory, config = data.draw(worlds())
    names = list(evidence.regions)
    w = {n: 100 // len(names) + (1 if i < 100 % len(names) else 0) for i, n in enumerate(names)}
    for i in range(8):
        now = T0 + timedelta(seconds=10 * i)
        ev = evidence.model_copy(
            update={
                "at": now,
                "regions": {n: data.draw(regions(n)) for n in names},
                "weights_in_effect": w,
                "weights_applied": w,
            }
        )
        decision, memory = decide(ev, memory, config, now)
        assert check_decision(ev, decision, config) == []
        if not decision.advisory:
            w = decision.weights_after
