"""verdict.py: each observation's exact words, and the edges of lost capacity, progress and the
fraction of failing replicas (docs/decisions.md, Verdicts)."""

from __future__ import annotations

from typing import Any

import pytest

from drctl.decision import RegionMemory, Verdict
from drctl.decision.verdict import Observation, judge_region, observe, quorum_confirms
from tests.decision.facts import T0, at, capacity, passive, probe, region
from tests.decision.test_verdict import CFG, late

# (case, region kwargs, last_finished, the observation)
WORDS: list[tuple[str, dict[str, Any], float | None, Observation]] = [
    (
        "credentials refused",
        {"probe": probe(auth_refused=True, completions_ok=0)},
        None,
        Observation("unknown", Verdict.UNKNOWN, "probe credentials refused: health unknown"),
    ),
    (
        "unreachable, no error named",
        {"probe": probe(answered=False, completions_ok=0)},
        None,
        Observation("fail", Verdict.DOWN, "gateway unreachable (no answer)"),
    ),
    (
        "unreachable, every error named",
        {"probe": probe(answered=False, completions_ok=0, errors=["refused", "timeout"])},
        None,
        Observation("fail", Verdict.DOWN, "gateway unreachable (refused, timeout)"),
    ),
    (
        "no ready replica",
        {"capacity": capacity(ready=0, loading=2)},
        None,
        Observation("fail", Verdict.DOWN, "no ready replica (2 loading)"),
    ),
    (
        "no completion, no error named",
        {"probe": probe(completions_ok=0)},
        None,
        Observation("fail", Verdict.DOWN, "0/2 completions answered (no answer)"),
    ),
    (
        "no completion, every error named",
        {"probe": probe(completions_ok=0, errors=["timeout", "503"])},
        None,
        Observation("fail", Verdict.DOWN, "0/2 completions answered (timeout, 503)"),
    ),
    (
        "the only completion tried failed",
        {"probe": probe(completions_ok=0, completions_tried=1, errors=["503"])},
        None,
        Observation("fail", Verdict.DOWN, "0/1 completions answered (503)"),
    ),
    (
        "saturated: one replica lost, the queue progresses by one",
        {"probe": late(), "capacity": capacity(ready=1)},
        119.0,
        Observation(
            "pass",
            Verdict.SATURATED,
            "saturated, not down: 6 waiting, 1 finished since the last probe, short of replicas: True, "
            "load over usable: False",
        ),
    ),
    (
        "one of two completions",
        {"probe": probe(completions_ok=1)},
        None,
        Observation("fail", Verdict.DEGRADED, "1/2 completions answered"),
    ),
    (
        "lost capacity, one request queued, over the objective",
        {
            "capacity": capacity(ready=1, load=5.0),
            "probe": probe(queue_waiting=1.0),
            "passive": passive(ttft_p99_ms=900.0),
        },
        None,
        Observation(
            "pass", Verdict.SATURATED, "TTFT p99 900 ms > objective 200 ms, capacity lost and requests queued"
        ),
    ),
    (
        "over the objective, capacity unknown, requests queued",
        {"capacity": None, "probe": probe(queue_waiting=3.0), "passive": passive(ttft_p99_ms=900.0)},
        None,
        Observation("pass", Verdict.DEGRADED, "TTFT p99 900 ms > objective 200 ms"),
    ),
    (
        "over the objective, a replica loading is not lost",
        {
            "capacity": capacity(ready=1, loading=1, load=5.0),
            "probe": probe(queue_waiting=3.0),
            "passive": passive(error_rate=0.05),
        },
        None,
        Observation("pass", Verdict.DEGRADED, "error rate 0.05 > objective 0.01"),
    ),
    (
        "half the ready replicas failing",
        {"probe": probe(replicas_failing=["r1", "r2"]), "capacity": capacity(ready=4, desired=4)},
        None,
        Observation("pass", Verdict.DEGRADED, "2/4 ready replicas failing"),
    ),
    (
        "capacity unknown: the failing replicas are all it is known to have",
        {"probe": probe(replicas_failing=["r1"]), "capacity": None},
        None,
        Observation("pass", Verdict.DEGRADED, "1/1 ready replicas failing"),
    ),
    (
        "capacity unknown, none failing",
        {"capacity": None},
        None,
        Observation("pass", Verdict.HEALTHY, "answers; 0/1 ready replicas failing"),
    ),
    (
        "requests stalled",
        {"passive": passive(stalled=True)},
        None,
        Observation("pass", Verdict.DEGRADED, "requests stalled: none finished in the window"),
    ),
]


@pytest.mark.parametrize(("case", "kw", "last_finished", "want"), WORDS, ids=[w[0] for w in WORDS])
def test_observation_and_its_words(
    case: str, kw: dict[str, Any], last_finished: float | None, want: Observation
) -> None:
    assert observe(region("a", 50, **kw), last_finished, CFG) == want


def test_quorum_words_count_the_up_votes_apart_from_the_unknown_ones() -> None:
    votes = {"v1": "down", "v2": "up", "v3": "unknown"}
    assert quorum_confirms(region("a", 50, votes=votes), 2) == (
        False,
        "1 of 3 vantage points see it down (1 up), quorum 2",
    )


def test_judge_region_measures_progress_from_the_remembered_finished_count() -> None:
    saturating = region("a", 50, probe=late(), capacity=capacity(ready=1))
    verdict, _, new = judge_region(saturating, RegionMemory(last_finished=100.0), CFG, at(10))
    assert verdict is Verdict.SATURATED
    assert new.last_finished == 120.0


def test_judge_region_unknown_tick_of_a_healthy_region_gives_the_observation_alone() -> None:
    verdict, reason, _ = judge_region(region("a", 50, probe=None), RegionMemory(), CFG, at(10))
    assert (verdict, reason) == (Verdict.UNKNOWN, "no probe this tick")
    unknown = RegionMemory(verdict=Verdict.UNKNOWN, since=T0)
    verdict, reason, _ = judge_region(region("a", 50, probe=None), unknown, CFG, at(10))
    assert (verdict, reason) == (Verdict.UNKNOWN, "no probe this tick; stays UNKNOWN")


def test_judge_region_a_failing_region_over_usable_capacity_is_breaching() -> None:
    # Users' completions fail (a suspect DEGRADED tick), and the load is over usable capacity (16):
    # the breach clock starts though the verdict is not SATURATED.
    over = region("a", 50, probe=probe(completions_ok=1), capacity=capacity(load=17.0))
    verdict, _, new = judge_region(over, RegionMemory(), CFG, at(10))
    assert verdict is Verdict.DEGRADED
    assert new.breach_since == at(10)
