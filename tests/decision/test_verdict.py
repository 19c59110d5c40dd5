"""verdict.py: one tick's observation, and the hysteresis state machine over ticks."""

from __future__ import annotations

from typing import Any

import pytest

from drctl.decision import DecisionConfig, RegionMemory, Verdict
from drctl.decision.verdict import judge_region, observe, quorum_confirms
from tests.decision.facts import at, capacity, dead, passive, probe, region

CFG = DecisionConfig(
    interval_s=10, failure_threshold=3, recovery_threshold=2, slo_ttft_p99_ms=200, slo_error_rate=0.01
)


def late(**kw: Any) -> Any:
    """A probe that got no first token in time, behind a queue."""
    base: dict[str, Any] = {
        "completions_ok": 0,
        "errors": ["timeout"],
        "queue_waiting": 6.0,
        "finished_total": 120.0,
    }
    return probe(**{**base, **kw})


# (case, region kwargs, last_finished, kind, condition)
OBSERVATIONS: list[tuple[str, dict[str, Any], float | None, str, Verdict]] = [
    ("healthy", {}, None, "pass", Verdict.HEALTHY),
    ("no probe", {"probe": None}, None, "unknown", Verdict.UNKNOWN),
    ("auth refused", {"probe": probe(auth_refused=True, completions_ok=0)}, None, "unknown", Verdict.UNKNOWN),
    ("unreachable", {"probe": dead()}, None, "fail", Verdict.DOWN),
    ("no ready replica, loading", {"capacity": capacity(ready=0, loading=2)}, None, "fail", Verdict.DOWN),
    ("no completion", {"probe": probe(completions_ok=0, errors=["503"])}, None, "fail", Verdict.DOWN),
    ("one of two completions", {"probe": probe(completions_ok=1)}, None, "fail", Verdict.DEGRADED),
    (
        "errors from a failing minority (1 of 4) excused",
        {"probe": probe(completions_ok=1, replicas_failing=["r1"]), "capacity": capacity(ready=4, desired=4)},
        None,
        "pass",
        Verdict.HEALTHY,
    ),
    (
        "errors from a failing half not excused",
        {"probe": probe(completions_ok=1, replicas_failing=["r1"]), "capacity": capacity(ready=2)},
        None,
        "fail",
        Verdict.DEGRADED,
    ),
    ("over usable capacity", {"capacity": capacity(load=16.5)}, None, "pass", Verdict.SATURATED),
    ("at usable capacity", {"capacity": capacity(load=16.0)}, None, "pass", Verdict.HEALTHY),
    (
        "lost capacity, queue and over the objective",
        {
            "capacity": capacity(ready=1, load=5.0),
            "probe": probe(queue_waiting=3.0),
            "passive": passive(ttft_p99_ms=900.0),
        },
        None,
        "pass",
        Verdict.SATURATED,
    ),
    (
        "over the objective with every replica serving: degraded (gray failure)",
        {"probe": probe(queue_waiting=3.0), "passive": passive(ttft_p99_ms=900.0)},
        None,
        "pass",
        Verdict.DEGRADED,
    ),
    (
        "lost capacity, over the objective, no queue",
        {"capacity": capacity(ready=1, load=5.0), "passive": passive(ttft_p99_ms=900.0)},
        None,
        "pass",
        Verdict.DEGRADED,
    ),
    ("ttft at the objective", {"passive": passive(ttft_p99_ms=200.0)}, None, "pass", Verdict.HEALTHY),
    ("ttft just over", {"passive": passive(ttft_p99_ms=200.5)}, None, "pass", Verdict.DEGRADED),
    ("errors at the objective", {"passive": passive(error_rate=0.01)}, None, "pass", Verdict.HEALTHY),
    ("errors just over", {"passive": passive(error_rate=0.011)}, None, "pass", Verdict.DEGRADED),
    ("server errors over", {"capacity": capacity(error_rate=0.5)}, None, "pass", Verdict.DEGRADED),
    ("server ttft over", {"capacity": capacity(ttft_p99_ms=201.0)}, None, "pass", Verdict.DEGRADED),
    ("stalled", {"passive": passive(stalled=True)}, None, "pass", Verdict.DEGRADED),
    (
        "replicas failing: 1 of 4 (at the fraction)",
        {"probe": probe(replicas_failing=["r1"]), "capacity": capacity(ready=4, desired=4)},
        None,
        "pass",
        Verdict.HEALTHY,
    ),
    (
        "replicas failing: 2 of 4 (over it)",
        {"probe": probe(replicas_failing=["r1", "r2"]), "capacity": capacity(ready=4, desired=4)},
        None,
        "pass",
        Verdict.DEGRADED,
    ),
    (
        "replicas failing, no capacity figures",
        {"probe": probe(replicas_failing=["r1"]), "capacity": None},
        None,
        "pass",
        Verdict.DEGRADED,
    ),
    (
        "loading replicas are never failing",
        {"capacity": capacity(ready=2, loading=2, desired=4)},
        None,
        "pass",
        Verdict.HEALTHY,
    ),
    # Saturated, not down (models/saturation.py): capacity lost, late only, a queue that progresses.
    ("saturated", {"probe": late(), "capacity": capacity(ready=1)}, 100.0, "pass", Verdict.SATURATED),
    ("late, nothing lost: down", {"probe": late()}, 100.0, "fail", Verdict.DOWN),
    (
        "late, more ready than desired: down",
        {"probe": late(), "capacity": capacity(ready=3)},
        100.0,
        "fail",
        Verdict.DOWN,
    ),
    (
        "late, the missing replica is loading: short now, saturated",
        {"probe": late(), "capacity": capacity(ready=1, loading=1)},
        100.0,
        "pass",
        Verdict.SATURATED,
    ),
    ("no progress: hung", {"probe": late(), "capacity": capacity(ready=1)}, 120.0, "fail", Verdict.DOWN),
    ("no earlier read", {"probe": late(), "capacity": capacity(ready=1)}, None, "fail", Verdict.DOWN),
    (
        "no queue",
        {"probe": late(queue_waiting=0.0), "capacity": capacity(ready=1)},
        100.0,
        "fail",
        Verdict.DOWN,
    ),
    (
        "no counter",
        {"probe": late(finished_total=None), "capacity": capacity(ready=1)},
        100.0,
        "fail",
        Verdict.DOWN,
    ),
    (
        "a hard error besides the late ones",
        {"probe": late(errors=["timeout", "503"]), "capacity": capacity(ready=1)},
        100.0,
        "fail",
        Verdict.DOWN,
    ),
    (
        "a failing replica that is not only late",
        {"probe": late(replicas_failing=["r1"], replicas_late_only=[]), "capacity": capacity(ready=1)},
        100.0,
        "fail",
        Verdict.DOWN,
    ),
    (
        "a failing replica that is only late",
        {"probe": late(replicas_failing=["r1"], replicas_late_only=["r1"]), "capacity": capacity(ready=1)},
        100.0,
        "pass",
        Verdict.SATURATED,
    ),
    (
        "no capacity facts: nothing known lost",
        {"probe": late(), "capacity": None},
        100.0,
        "fail",
        Verdict.DOWN,
    ),
    (
        "nothing lost but load over usable: saturated",
        {"probe": late(), "capacity": capacity(load=16.5)},
        100.0,
        "pass",
        Verdict.SATURATED,
    ),
    (
        "nothing lost, load at usable: down",
        {"probe": late(), "capacity": capacity(load=16.0)},
        100.0,
        "fail",
        Verdict.DOWN,
    ),
    (
        "replicas loading, the ready ones over usable: saturated",
        {"probe": late(), "capacity": capacity(ready=1, loading=1, load=9.0)},
        100.0,
        "pass",
        Verdict.SATURATED,
    ),
]


@pytest.mark.parametrize(
    ("case", "kw", "last", "kind", "condition"), OBSERVATIONS, ids=[c[0] for c in OBSERVATIONS]
)
def test_observe(case: str, kw: dict[str, Any], last: float | None, kind: str, condition: Verdict) -> None:
    seen = observe(region("a", 50, **kw), last, CFG)
    assert (seen.kind, seen.condition) == (kind, condition), seen.reason


def walk(
    outcomes: list[str], cfg: DecisionConfig = CFG, start: RegionMemory | None = None, **kw: Any
) -> list[Verdict]:
    """The verdicts after each tick of a run of 'ok', 'fail' and 'none' probes."""
    facts = {"ok": probe(), "fail": dead(), "none": None}
    mem = start or RegionMemory()
    out = []
    for i, o in enumerate(outcomes):
        verdict, _, mem = judge_region(region("a", 50, probe=facts[o], **kw), mem, cfg, at(10 * i))
        out.append(verdict)
    return out


H, D, S, R, U = Verdict.HEALTHY, Verdict.DOWN, Verdict.DEGRADED, Verdict.RECOVERING, Verdict.UNKNOWN

HYSTERESIS = [
    ("one blip", ["fail", "ok"], [S, H]),
    ("threshold - 1 failures", ["fail", "fail"], [S, S]),
    ("threshold failures", ["fail"] * 3, [S, S, D]),
    ("a pass restarts the count", ["fail", "fail", "ok", "fail", "fail"], [S, S, H, S, S]),
    ("recovery needs recovery_threshold passes", ["fail"] * 3 + ["ok", "ok", "ok"], [S, S, D, R, H, H]),
    ("a relapse while recovering", ["fail"] * 3 + ["ok", "fail", "ok"], [S, S, D, R, D, R]),
    ("no probe: unknown", ["none", "ok"], [U, H]),
    ("no probe keeps DOWN", ["fail"] * 3 + ["none"], [S, S, D, D]),
    ("no probe keeps RECOVERING", ["fail"] * 3 + ["ok", "none", "ok"], [S, S, D, R, R, H]),
    ("no probe does not reset the failures", ["fail", "fail", "none", "fail"], [S, S, U, D]),
]


@pytest.mark.parametrize(("case", "ticks", "want"), HYSTERESIS, ids=[c[0] for c in HYSTERESIS])
def test_hysteresis(case: str, ticks: list[str], want: list[Verdict]) -> None:
    assert walk(ticks) == want


def test_recovery_threshold_one_skips_recovering() -> None:
    cfg = CFG.model_copy(update={"recovery_threshold": 1})
    assert walk(["fail"] * 3 + ["ok"], cfg) == [S, S, D, H]


def test_quorum_confirms_down_only_with_enough_down_votes() -> None:
    cfg = CFG.model_copy(update={"quorum": 2})
    assert walk(["fail"] * 3, cfg, votes={"m": "down", "b": "down", "c": "up"})[-1] is D
    assert walk(["fail"] * 3, cfg, votes={"m": "down", "b": "up", "c": "up"})[-1] is U
    assert walk(["fail"] * 3, cfg, votes={"m": "down", "b": "unknown"})[-1] is U


@pytest.mark.parametrize(
    ("quorum", "downs", "confirmed"), [(0, 0, True), (1, 0, True), (2, 1, False), (2, 2, True), (3, 2, False)]
)
def test_quorum_boundaries(quorum: int, downs: int, confirmed: bool) -> None:
    votes: dict[str, Any] = {f"v{i}": "down" for i in range(downs)} | {"up": "up"}
    ok, words = quorum_confirms(region("a", 50, votes=votes), quorum)
    assert ok is confirmed
    assert (f"quorum {quorum}" in words) is (quorum > 1)


def test_memory_records_since_counters_breach_and_progress() -> None:
    mem = RegionMemory()
    r = region("a", 50, probe=probe(finished_total=7.0), capacity=capacity(load=17.0))
    v, reason, mem = judge_region(r, mem, CFG, at(0))
    assert (v, mem.since, mem.breach_since, mem.last_finished) == (Verdict.SATURATED, at(0), at(0), 7.0)
    assert reason == "load over usable capacity"
    _, _, mem2 = judge_region(r, mem, CFG, at(10))
    assert (mem2.since, mem2.breach_since, mem2.consecutive_successes) == (at(0), at(0), 2)
    _, _, mem3 = judge_region(region("a", 50, probe=None), mem2, CFG, at(20))
    assert (mem3.since, mem3.breach_since, mem3.last_finished) == (at(20), None, 7.0)
    assert mem.consecutive_successes == 1  # the input memory is not changed


def test_reasons_name_the_count() -> None:
    _, reason, mem = judge_region(region("a", 50, probe=dead()), RegionMemory(), CFG, at(0))
    assert reason == "gateway unreachable (refused); failed 1/3"
    for i in (1, 2):
        _, reason, mem = judge_region(region("a", 50, probe=dead()), mem, CFG, at(10 * i))
    assert reason == "gateway unreachable (refused); failed 3/3, no quorum configured"
    _, reason, mem = judge_region(region("a", 50, probe=dead()), mem, CFG, at(30))
    assert reason == "gateway unreachable (refused); still down"
    _, reason, mem = judge_region(region("a", 50), mem, CFG, at(40))
    assert reason.endswith("passed 1/2")
    _, reason, _ = judge_region(region("a", 50, probe=None), mem, CFG, at(50))
    assert reason == "no probe this tick; stays RECOVERING"


@pytest.mark.parametrize(
    ("kw", "condition"),
    [
        ({"probe": probe(completions_tried=0, completions_ok=0)}, Verdict.HEALTHY),
        ({"capacity": None}, Verdict.HEALTHY),
        ({"capacity": None, "probe": probe(replicas_failing=["r1"], completions_ok=1)}, Verdict.DEGRADED),
    ],
)
def test_observe_without_completions_or_capacity(kw: dict[str, Any], condition: Verdict) -> None:
    seen = observe(region("a", 50, **kw), None, CFG)
    assert seen.condition is condition


def test_quorum_words_count_every_view() -> None:
    votes: dict[str, Any] = {"m": "down", "b": "up", "c": "unknown", "d": "up"}
    assert quorum_confirms(region("a", 50, votes=votes), 2) == (
        False,
        "1 of 4 vantage points see it down (2 up), quorum 2",
    )
