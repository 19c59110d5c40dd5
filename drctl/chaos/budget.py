"""How long an experiment can take at worst, and the rule that its rollbacks always fit.

The drill activity sends `chaos run` SIGTERM at the drill's deadline (drills.timeout_s), and chaoslib
then plays the rollbacks; ROLLBACK_GRACE_S later it is killed. A rollback paused for as long as the
drill itself, or stuck behind a probe that waits for minutes, would never run. So every activity has
a worst case computed from its checked arguments (pauses, request timeouts, retries, waits), and:

- the whole run (the steady-state hypothesis twice, the method, the rollbacks) plus ROLLBACK_MARGIN_S
  fits inside drills.timeout_s, so a valid experiment is never interrupted at the deadline at all;
- the rollbacks alone plus ROLLBACK_MARGIN_S fit inside ROLLBACK_GRACE_S, so even an interrupted
  run has time to play them before it is killed.

The drill workflow clears the target itself afterwards anyway (workflows/drill.py); these bounds
make that the safety net, not the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# How long `chaos run` gets after SIGTERM to play its rollbacks before it is killed (activities/chaos.py).
ROLLBACK_GRACE_S = 60.0
# Kept free in both budgets: the interpreter's start, the journal's write, a clock that runs late.
ROLLBACK_MARGIN_S = 10.0
# One drctl action: an admin call's 10 s timeout, for its connect and for its answer.
ACTION_WORST_S = 20.0
# probes.monitor_status and region_state: the Temporal query's own bound.
MONITOR_QUERY_S = 15.0


@dataclass(frozen=True)
class Cost:
    """An activity's worst case, and the field that contributes most to it (for a refusal)."""

    seconds: float
    field: str


def pauses_s(where: str, act: dict[str, Any]) -> list[Cost]:
    """The activity's pauses (already checked to be numbers by validate)."""
    pauses = act.get("pauses") or {}
    if not isinstance(pauses, dict):
        return []
    return [
        Cost(float(v), f"{where}.pauses.{k}")
        for k, v in sorted(pauses.items())
        if type(v) in (int, float) and math.isfinite(v)
    ]


def provider_s(where: str, func: str | None, call: dict[str, Any]) -> Cost:
    """The worst case of one call of a drctl function (`func` None: an HTTP request) with `call`."""
    args = f"{where}.provider.arguments"
    if func is None or func == "http_request":
        attempts = 1 + int(call.get("max_retries", 0))
        return Cost(float(call.get("timeout", 5)) * attempts, f"{args}.timeout")
    if func in ("global_success_ratio", "traffic_share"):
        return Cost(float(call["requests"]) * float(call["timeout_s"]), f"{args}.requests")
    if func in ("wait_for_traffic_moved", "wait_for_served"):
        # The loop checks the clock before each request, so the last one can start just in time.
        return Cost(float(call["within_s"]) + float(call["timeout_s"]), f"{args}.within_s")
    if func in ("monitor_status", "region_state"):
        return Cost(MONITOR_QUERY_S, f"{where}.provider")
    return Cost(ACTION_WORST_S, f"{where}.provider")


def activity_s(costs: list[Cost]) -> Cost:
    """The sum, named by its largest part."""
    if not costs:
        return Cost(0.0, "")
    top = max(costs, key=lambda c: c.seconds)
    return Cost(sum(c.seconds for c in costs), top.field)


class OverBudget(ValueError):
    """An experiment whose worst case does not fit; the message names the field and both figures."""


def check_budget(sections: dict[str, list[Cost]], drill_timeout_s: float) -> None:
    """`sections`: each activity's worst case, by section (steady-state-hypothesis, method, rollbacks)."""
    rollbacks = activity_s(sections.get("rollbacks", []))
    room = ROLLBACK_GRACE_S - ROLLBACK_MARGIN_S
    if rollbacks.seconds > room:
        raise OverBudget(
            f"{rollbacks.field}: the rollbacks may take {rollbacks.seconds:g}s, more than the {room:g}s "
            f"they are sure to get ({ROLLBACK_GRACE_S:g}s after the drill's deadline, less a "
            f"{ROLLBACK_MARGIN_S:g}s margin)"
        )
    hypothesis = activity_s(sections.get("steady-state-hypothesis", []))
    method = activity_s(sections.get("method", []))
    total = 2 * hypothesis.seconds + method.seconds + rollbacks.seconds
    room = drill_timeout_s - ROLLBACK_MARGIN_S
    if total > room:
        top = max((c for costs in sections.values() for c in costs), key=lambda c: c.seconds)
        raise OverBudget(
            f"{top.field}: the experiment may take {total:g}s (the steady-state hypothesis twice, the "
            f"method and the rollbacks), more than the {room:g}s that leaves its rollbacks inside the "
            f"drill's deadline (drills.timeout_s {drill_timeout_s:g}s, less a {ROLLBACK_MARGIN_S:g}s margin)"
        )
