"""judge(): every way a Chaos Toolkit journal can fail a drill, pinned on hand-built journals.

tests/drills/test_journal.py judges journals the real `chaos run` wrote; these cover each rule
alone, with the exact reason a reviewer reads."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from drctl.chaos.journal import _hypothesis_problem, _parse_time, _why, judge

AT = "2026-11-30T08:00:01.500000+00:00"


def _entry(name: str, kind: str, status: str = "succeeded", **more: Any) -> dict[str, Any]:
    return {"activity": {"name": name, "type": kind}, "status": status, **more}


def _state(met: bool, probes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"steady_state_met": met, "probes": probes or []}


def _journal(
    run: list[dict[str, Any]],
    *,
    status: str | None = "completed",
    before: Any = True,
    after: Any = True,
    deviated: bool = False,
    rollbacks: list[dict[str, Any]] | None = None,
    planned_rollbacks: int = 1,
    hypothesis: bool = True,
) -> dict[str, Any]:
    states: dict[str, Any] = {}
    if before is not None:
        states["before"] = before if isinstance(before, dict) else _state(before)
    if after is not None:
        states["after"] = after if isinstance(after, dict) else _state(after)
    return {
        "status": status,
        "deviated": deviated,
        "experiment": {
            "steady-state-hypothesis": {"probes": [{"name": "p"}]} if hypothesis else {},
            "method": [{"type": "action", "name": "kill"}, {"type": "probe", "name": "look"}],
            "rollbacks": [{"name": f"rb{i}"} for i in range(planned_rollbacks)],
        },
        "steady_states": states,
        "run": run,
        "rollbacks": [_entry("rb0", "action")] if rollbacks is None else rollbacks,
    }


FAULT = _entry("kill", "action", output={"injected": True, "at": AT}, end="2026-11-30T08:00:09")


def test_a_clean_run_passes_with_the_fault_time_from_the_action() -> None:
    v = judge(_journal([FAULT, _entry("look", "probe")]))
    assert v.model_dump() == {
        "status": "completed",
        "steady_state_before_met": True,
        "steady_state_after_met": True,
        "deviated": False,
        "fault_injected": True,
        "fault_at": datetime(2026, 11, 30, 8, 0, 1, 500000, tzinfo=UTC),
        "failed_actions": [],
        "failed_probes": [],
        "rollbacks_expected": 1,
        "rollbacks_ok": 1,
        "rollbacks_failed": [],
        "reasons": [],
        "aborted": False,
    }
    assert v.ok


def test_the_fault_time_falls_back_to_the_entry_end_and_only_the_first_fault_counts() -> None:
    generic = _entry("kill", "action", output="done", end="2026-11-30T08:00:09")
    later = _entry("kill2", "action", output={"at": "2026-11-30T09:00:00"})
    v = judge(_journal([generic, later]))
    assert v.fault_injected and v.fault_at == datetime(2026, 11, 30, 8, 0, 9)
    bad_at = _entry("kill", "action", output={"at": "not a time"}, end="2026-11-30T08:00:07")
    assert judge(_journal([bad_at])).fault_at == datetime(2026, 11, 30, 8, 0, 7)
    no_time = judge(_journal([_entry("kill", "action", output=None)]))
    assert no_time.fault_injected and no_time.fault_at is None


def test_an_action_that_hurt_nothing_is_not_a_fault() -> None:
    v = judge(_journal([_entry("kill", "action", output={"injected": False}), _entry("look", "probe")]))
    assert not v.fault_injected and v.fault_at is None
    assert v.reasons == ["no fault action ran: nothing was injected"]
    assert v.aborted and not v.ok
    # A probe's success never counts as the fault.
    assert judge(_journal([_entry("look", "probe", output={"at": AT})])).fault_injected is False


def test_failed_actions_and_probes_are_named_with_their_exception() -> None:
    run = [
        _entry("kill", "action", "failed", exception=["Traceback ...", "  HTTPError: 503 \n"]),
        _entry("look", "probe", "failed", exception="timeout "),
        _entry("poke", "probe", None, output=7),
        {"status": "failed"},
    ]
    v = judge(_journal(run))
    assert v.failed_actions == ["kill"] and v.failed_probes == ["look", "poke", "?"]
    assert v.reasons == [
        "action 'kill' failed: HTTPError: 503",
        "probe 'look' failed: timeout",
        "probe 'poke' did not finish: returned 7",
        "probe '?' failed: returned None",
    ]
    assert not v.aborted and not v.fault_injected


def test_a_steady_state_broken_before_the_method_aborts_the_drill() -> None:
    before = _state(False, [_entry("p", "probe", "failed", exception=["x", "ConnectError"])])
    v = judge(_journal([], before=before, after=None))
    assert v.steady_state_before_met is False and v.steady_state_after_met is None
    assert v.reasons == ["steady state before the fault: probe 'p' failed: ConnectError"]
    assert v.aborted
    tolerance = {"name": "p", "type": "probe", "tolerance": {"type": "range", "range": [0.9, 1.0]}}
    outside = _state(
        False, [{"activity": tolerance, "status": "succeeded", "tolerance_met": False, "output": 0.5}]
    )
    assert judge(_journal([], before=outside, after=None)).reasons == [
        "steady state before the fault: probe 'p' returned 0.5, "
        "outside tolerance {'type': 'range', 'range': [0.9, 1.0]}"
    ]
    assert judge(_journal([], before=_state(False), after=None)).reasons == [
        "steady state not met before the fault"
    ]
    assert judge(_journal([], before=None, after=None)).reasons == [
        "the steady-state hypothesis did not run before the method"
    ]


def test_the_hypothesis_is_only_judged_when_the_experiment_has_one() -> None:
    v = judge(_journal([FAULT], before=None, after=None, hypothesis=False))
    assert v.reasons == [] and v.fault_injected


def test_a_deviation_after_the_fault_is_a_failure_with_its_cause() -> None:
    after = _state(False, [_entry("p", "probe", tolerance_met=False, output=0.2)])
    v = judge(_journal([FAULT], after=after, deviated=True))
    assert v.deviated and v.steady_state_after_met is False
    assert v.reasons == ["steady state after the fault: probe 'p' returned 0.2, outside tolerance None"]
    assert not v.aborted
    assert judge(_journal([FAULT], after=_state(True), deviated=True)).reasons == [
        "the steady state deviated after the fault"
    ]
    assert judge(_journal([FAULT], after=None)).reasons == [
        "the steady-state hypothesis did not run after the method"
    ]
    # Deviation without a fault is not judged: nothing was hurt.
    assert judge(_journal([_entry("kill", "action", output={"injected": False})], deviated=True)).reasons == [
        "no fault action ran: nothing was injected"
    ]


def test_status_other_than_completed_is_a_reason() -> None:
    assert judge(_journal([FAULT], status=None)).reasons == [
        "the journal has no status: the experiment did not finish"
    ]
    for status in ("interrupted", "aborted"):
        v = judge(_journal([FAULT], status=status, after=None))
        assert v.reasons == [f"the experiment was {status}"], v.reasons
    stopped = judge(_journal([], status="interrupted", after=None))
    assert stopped.reasons == ["the experiment was interrupted", "no fault action ran: nothing was injected"]
    assert stopped.aborted


def test_rollbacks_that_failed_or_never_ran_are_reasons() -> None:
    failed = [_entry("rb0", "action"), _entry("rb1", "action", "failed", exception=["boom"])]
    v = judge(_journal([FAULT], rollbacks=failed, planned_rollbacks=2))
    assert (v.rollbacks_expected, v.rollbacks_ok, v.rollbacks_failed) == (2, 1, ["rb1"])
    assert v.reasons == ["rollback 'rb1' failed: boom"]
    missing = judge(_journal([FAULT], rollbacks=[_entry("rb0", "action")], planned_rollbacks=3))
    assert missing.reasons == ["only 1 of 3 rollbacks ran"] and missing.rollbacks_ok == 1
    none_ran = judge(_journal([FAULT], rollbacks=[], planned_rollbacks=1))
    assert none_ran.reasons == ["only 0 of 1 rollbacks ran"]
    # Without a fault, rollbacks that did not run undo nothing.
    assert judge(_journal([_entry("kill", "action", output={"injected": False})], rollbacks=[])).reasons == [
        "no fault action ran: nothing was injected"
    ]


def test_an_empty_journal_says_it_did_not_finish() -> None:
    v = judge({})
    assert v.status is None and v.steady_state_before_met is None and v.rollbacks_expected == 0
    assert v.reasons == ["the journal has no status: the experiment did not finish"]
    assert v.aborted


def test_helpers() -> None:
    assert _why({"exception": [], "output": "o"}) == "returned 'o'"
    assert _why({"exception": ["a", " last \n"]}) == "last"
    assert _why({"exception": " one "}) == "one"
    assert _parse_time("") is None and _parse_time(None) is None and _parse_time("x") is None
    assert _parse_time(AT) == datetime(2026, 11, 30, 8, 0, 1, 500000, tzinfo=UTC)
    assert _hypothesis_problem(_state(True), "before") is None
