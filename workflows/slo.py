"""RTO to the objective, as an operation measures it once traffic has moved: "SLO restored".

A failover (and a rebalance) calls `measure` after its verification: the target region's worker
reads the target's replicas until TTFT p99 and error rate are within `objectives.slo`, held for
its window (activities/slo.py, drctl/models/slo.py). The wait is bounded by the RTO target plus
the window from the fault, so an operation never hangs on a target that stays slow; it then
reports why, e.g. "not restored within 30s: ttft_p99 412 ms > 200 ms at 39.0s".
"""

from __future__ import annotations

from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl.models.fleet_spec import FleetSpec
    from drctl.models.slo import SloObjective, SloWatchInput, SloWatchResult, observe_until_s
    from workflows import calls
    from workflows.common import Phases
    from workflows.operation import cause_of

# Before this patch a failover ended at its verification; with it, it also reports "SLO restored".
PATCH = "failover-slo-restored"
PHASE = "slo"
# Start-up and the last read's timeouts, beyond the watch's own bound.
SLACK_S = 15.0


async def measure(
    phases: Phases, spec: FleetSpec, target: str, fault_at: datetime, queue: str
) -> tuple[SloWatchResult | None, str]:
    """(the watch's result or None when it could not run, a one-line summary for the operation)."""
    inp = SloWatchInput(
        region=target,
        objective=SloObjective.from_config(spec.slo),
        fault_at=fault_at,
        within_s=spec.rto_target_s,
    )
    elapsed = (workflow.now() - fault_at).total_seconds()
    # What the activity may still take (models.slo.observe_until_s), and never less than one window.
    left = max(observe_until_s(inp) - elapsed, inp.objective.window_s + inp.interval_s)
    obj = inp.objective
    phases.enter(
        PHASE,
        f"waiting for `{target}` to hold TTFT p99 <= {obj.ttft_p99_ms:g} ms and errors <= "
        f"{obj.error_rate:.1%} for {obj.window_s:g}s (at most {left:.0f}s)",
    )
    try:
        res = await calls.watch_slo(
            inp, queue=queue, bound_s=left + SLACK_S, summary=f"SLO restored in {target}?"
        )
    except (ActivityError, ApplicationError) as exc:
        why = f"SLO restoration not measured: {cause_of(exc)}"
        phases.note("SLO", why)
        return None, why
    text = res.summary(spec.rto_target_s)
    phases.note("SLO", text)
    return res, text
