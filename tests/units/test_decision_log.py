"""The monitor's decision log: logged on change and periodically while holding, bounded, cheap to keep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from drctl.models.monitor_decisions import Decision, DecisionLog

T0 = datetime(2026, 12, 1, 3, 0, tzinfo=UTC)


def _decision(at_s: float, **fields: Any) -> Decision:
    """A decision at T0 + `at_s`: a hold at a 60/40 split unless `fields` say otherwise."""
    base: dict[str, Any] = {
        "at": T0 + timedelta(seconds=at_s),
        "action": "hold",
        "mode": "automatic",
        "outcome": "held",
        "weights_before": {"a": 60, "b": 40},
        "weights_after": {"a": 60, "b": 40},
    }
    return Decision(**{**base, **fields})


def _hold(at_s: float, ttft: float = 120.0) -> Decision:
    return _decision(
        at_s,
        reasons=[f"a within the objective (TTFT p99 {ttft:.0f} ms ≤ 200 ms)"],
        evidence={"a": {"ttft_p99_ms": ttft}},
    )


def _shed(at_s: float, a: int) -> Decision:
    reasons = ["a capacity 20 rps < 36 rps its share needs"]
    return _decision(
        at_s, action="shed", outcome="applied", weights_after={"a": a, "b": 100 - a}, reasons=reasons
    )


def test_a_hold_repeated_every_tick_is_logged_once_then_every_held_every_s() -> None:
    log = DecisionLog(held_every_s=300)
    logged = [log.record(_hold(t, ttft=100 + t % 7)) for t in range(0, 900, 2)]  # a tick every 2 s
    # New figures each tick are not a change: t=0, then t=300 and t=600.
    assert sum(logged) == 3
    assert [e.at for e in log.entries] == [T0 + timedelta(seconds=s) for s in (0, 300, 600)]
    assert log.latest is not None and log.latest.at == T0 + timedelta(seconds=898)
    assert log.unchanged == 149  # ticks 602..898, since the t=600 entry


def test_every_change_is_logged_and_the_log_keeps_only_the_last_entries() -> None:
    log = DecisionLog(max_entries=5)
    for i in range(12):
        assert log.record(_shed(i, a=50 - i))  # each a different target: each logged
    assert len(log.entries) == 5
    assert [e.weights_after["a"] for e in log.entries] == [43, 42, 41, 40, 39]
    assert log.dropped == 7


def test_the_same_shed_twice_is_one_entry_but_a_hold_after_it_is_a_change() -> None:
    log = DecisionLog()
    assert log.record(_shed(0, 40))
    assert not log.record(_shed(1, 40))
    assert log.record(_hold(2))
    assert [e.action for e in log.entries] == ["shed", "hold"]


def test_the_log_survives_a_round_trip_as_continue_as_new_carries_it() -> None:
    log = DecisionLog(max_entries=3)
    for i in range(4):
        log.record(_shed(i, 50 - i))
    back = DecisionLog.model_validate_json(log.model_dump_json())
    assert back == log
    assert "shed [automatic, applied] a 60/b 40 → a 47/b 53" in back.entries[-1].line()
