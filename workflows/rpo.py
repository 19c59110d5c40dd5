"""The failover's RPO preflight: how far behind the target's replicas are, and what that allows.

Normal mode refuses a target whose replication lag exceeds objectives.rpo_target_s (with --force it
proceeds and records the exposure); emergency mode always proceeds and records the data-loss
exposure, because the source is already failing and waiting cannot bring its data back.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from drctl.models.failover import FailoverInput, FailoverPlan
    from drctl.models.rpo import DataLossExposure, RpoCheck, RpoCheckInput
    from workflows.common import NO_RETRY, Phases
    from workflows.progressive import reason_of

PATCH = "rpo-preflight"


async def rpo_preflight(phases: Phases, inp: FailoverInput, plan: FailoverPlan, tq: str) -> DataLossExposure | None:
    """Adds a refusal to plan.problems, or returns the exposure the failover accepts."""
    try:
        # One attempt: the failover is racing its RTO, and an unmeasurable lag is itself the answer.
        check: RpoCheck = await workflow.execute_activity(
            "check_rpo", RpoCheckInput(target=inp.target), result_type=RpoCheck,
            summary=f"replication lag of {inp.target}", task_queue=tq, retry_policy=NO_RETRY,
            start_to_close_timeout=timedelta(seconds=30), schedule_to_start_timeout=timedelta(seconds=30),
            heartbeat_timeout=timedelta(seconds=15),
        )
    except ActivityError as exc:
        # The RPO target lives in the workers' config; unknown here, and irrelevant to an unknown lag.
        check = RpoCheck(target=inp.target, rpo_target_s=0.0, errors=[reason_of(exc)])
    if not check.reports and not check.errors:
        return None  # the target holds no replicas: nothing to lose
    lag = "unknown" if check.lag_s is None else f"{check.lag_s:.1f} s"
    phases.note("replication lag", f"{lag} (RPO {check.rpo_target_s:g} s), {check.objects_behind} object(s) behind")
    if check.exceeded and not inp.emergency and not inp.force:
        plan.problems.append(f"{check.describe()} (use --force to override)")
        return None
    if not inp.emergency and not check.exceeded:
        return None
    exposure = DataLossExposure(lag_s=check.lag_s, objects=check.objects_behind, rpo_target_s=check.rpo_target_s,
                                forced=not inp.emergency, detail=check.describe() if check.exceeded else "in sync")
    phases.note("data-loss exposure", f"{lag}, {exposure.objects} object(s)")
    return exposure
