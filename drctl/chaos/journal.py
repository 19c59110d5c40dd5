"""The verdict of a Chaos Toolkit journal.

`chaos run` reports status `completed` and exits 0 when the steady state was already broken before
the method (nothing injected), and when a method action failed. So the status is never read alone:
the before/after hypotheses, `deviated`, every run entry and every rollback are checked.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from drctl.models.drill import JournalVerdict


def _name(entry: dict[str, Any]) -> str:
    return str((entry.get("activity") or {}).get("name") or "?")


def _kind(entry: dict[str, Any]) -> str:
    return str((entry.get("activity") or {}).get("type") or "")


def _why(entry: dict[str, Any]) -> str:
    """The one line that explains a failed entry: its exception's last line, else its output."""
    exc = entry.get("exception")
    if isinstance(exc, list) and exc:
        return str(exc[-1]).strip()
    if exc:
        return str(exc).strip()
    return f"returned {entry.get('output')!r}"


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None


def _hypothesis_problem(state: dict[str, Any] | None, when: str) -> str | None:
    if state is None:
        return f"the steady-state hypothesis did not run {when} the method"
    if state.get("steady_state_met"):
        return None
    for probe in state.get("probes") or []:
        if probe.get("status") != "succeeded":
            return f"steady state {when} the fault: probe '{_name(probe)}' failed: {_why(probe)}"
        if probe.get("tolerance_met") is False:
            tolerance = (probe.get("activity") or {}).get("tolerance")
            return (
                f"steady state {when} the fault: probe '{_name(probe)}' returned "
                f"{probe.get('output')!r}, outside tolerance {tolerance!r}"
            )
    return f"steady state not met {when} the fault"


def judge(journal: dict[str, Any]) -> JournalVerdict:
    """Read a journal the way a reviewer would and list every reason it is not a pass."""
    v = JournalVerdict(status=journal.get("status"), deviated=bool(journal.get("deviated")))
    experiment = journal.get("experiment") or {}
    states = journal.get("steady_states") or {}
    before, after = states.get("before"), states.get("after")
    v.steady_state_before_met = None if before is None else bool(before.get("steady_state_met"))
    v.steady_state_after_met = None if after is None else bool(after.get("steady_state_met"))

    if v.status is None:
        v.reasons.append("the journal has no status: the experiment did not finish")
    if v.status in ("interrupted", "aborted"):
        v.reasons.append(f"the experiment was {v.status}")

    has_hypothesis = bool((experiment.get("steady-state-hypothesis") or {}).get("probes"))
    problem_before = _hypothesis_problem(before, "before") if has_hypothesis else None
    if problem_before:
        v.reasons.append(problem_before)

    planned_actions = [a for a in experiment.get("method") or [] if a.get("type") == "action"]
    for entry in journal.get("run") or []:
        if entry.get("status") == "succeeded":
            output = entry.get("output")
            # drctl's actions say whether they hurt anything; a generic action's success counts.
            hurt = not (isinstance(output, dict) and output.get("injected") is False)
            if _kind(entry) == "action" and hurt and not v.fault_injected:
                v.fault_injected = True
                v.fault_at = _parse_time(
                    output.get("at") if isinstance(output, dict) else None
                ) or _parse_time(entry.get("end"))
            continue
        if _kind(entry) == "action":
            v.failed_actions.append(_name(entry))
            v.reasons.append(
                f"action '{_name(entry)}' {entry.get('status') or 'did not finish'}: {_why(entry)}"
            )
        else:
            v.failed_probes.append(_name(entry))
            v.reasons.append(
                f"probe '{_name(entry)}' {entry.get('status') or 'did not finish'}: {_why(entry)}"
            )
    if planned_actions and not v.fault_injected and not v.failed_actions and not problem_before:
        v.reasons.append("no fault action ran: nothing was injected")

    if v.fault_injected and has_hypothesis:
        if v.deviated:
            v.reasons.append(
                _hypothesis_problem(after, "after") or "the steady state deviated after the fault"
            )
        elif after is None and v.status not in ("interrupted", "aborted"):
            v.reasons.append("the steady-state hypothesis did not run after the method")

    planned_rollbacks = experiment.get("rollbacks") or []
    v.rollbacks_expected = len(planned_rollbacks)
    ran = journal.get("rollbacks") or []
    for entry in ran:
        if entry.get("status") == "succeeded":
            v.rollbacks_ok += 1
        else:
            v.rollbacks_failed.append(_name(entry))
            v.reasons.append(f"rollback '{_name(entry)}' {entry.get('status')}: {_why(entry)}")
    if len(ran) < len(planned_rollbacks) and v.fault_injected:
        v.reasons.append(f"only {len(ran)} of {len(planned_rollbacks)} rollbacks ran")

    # Nothing hurt because the system was not steady to begin with (or the run stopped first):
    # that is an aborted drill, not a failed one.
    v.aborted = not v.fault_injected and not v.failed_actions and bool(v.reasons)
    return v
