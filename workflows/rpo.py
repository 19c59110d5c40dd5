"""The failover's data preflight: replication lag of the target's replicas against the RPO, and
release parity of the target with the source.

Normal mode refuses a target whose lag exceeds objectives.rpo_target_s, or that would serve a
different model than the source; with --force it proceeds and records the exposure. Emergency mode
always proceeds and records the data-loss exposure, because the source is already failing and
waiting cannot bring its data back; it skips the release comparison, which needs the source's
cluster, and bounds the lag check tightly so the RTO does not pay for a dead source's S3.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from drctl.models.failover import FailoverInput, FailoverPlan
    from drctl.models.migration import MigrationRequest
    from drctl.models.rpo import ArtifactsInput, ArtifactsResult, DataLossExposure, RpoCheck, RpoCheckInput
    from drctl.models.upgrade import Outcome
    from workflows import calls
    from workflows.common import Phases
    from workflows.operation import cause_of
    from workflows.progressive import Stop

PATCH = "rpo-preflight"
MIGRATE_PATCH = "migrate-artifacts"


async def rpo_preflight(
    phases: Phases, inp: FailoverInput, plan: FailoverPlan, tq: str
) -> DataLossExposure | None:
    """Adds refusals to plan.problems, or returns the exposure the failover accepts."""
    bound = 8.0 if inp.emergency else 30.0
    sources = [s for s in (plan.source or "").split(",") if s]
    try:
        check = await calls.check_rpo(
            RpoCheckInput(target=inp.target, sources=sources, parity=not inp.emergency, timeout_s=bound - 3),
            queue=tq,
            bound_s=bound,
            summary=f"replication lag and release parity of {inp.target}",
        )
    except ActivityError as exc:
        # The RPO target lives in the workers' config; unknown here, and irrelevant to an unknown lag.
        check = RpoCheck(target=inp.target, rpo_target_s=0.0, errors=[cause_of(exc)])
    _parity(phases, inp, plan, check)
    if not check.reports and not check.errors:
        return None  # the target holds no replicas: nothing to lose
    lag = "unknown" if check.lag_s is None else f"{check.lag_s:.1f} s"
    phases.note(
        "replication lag", f"{lag} (RPO {check.rpo_target_s:g} s), {check.objects_behind} object(s) behind"
    )
    if check.exceeded and not inp.emergency and not inp.force:
        plan.problems.append(f"{check.describe()} (use --force to override)")
        return None
    if not inp.emergency and not check.exceeded:
        return None
    at_fault = check.lag_at(inp.fault_at) if inp.emergency else check.lag_s
    exposure = DataLossExposure(
        lag_s=at_fault,
        measured_lag_s=check.lag_s,
        objects=check.objects_behind,
        rpo_target_s=check.rpo_target_s,
        forced=not inp.emergency,
        detail=check.describe()
        if check.exceeded
        else f"lag {lag} within the RPO of {check.rpo_target_s:g} s",
    )
    shown = "unknown" if at_fault is None else f"{at_fault:.1f} s"
    phases.note("data-loss exposure", f"{shown} at the fault, {exposure.objects} object(s)")
    return exposure


def _parity(phases: Phases, inp: FailoverInput, plan: FailoverPlan, check: RpoCheck) -> None:
    for p in check.parity:
        text = "; ".join(p.drift + p.errors) or "in parity"
        phases.note(f"release {p.target} vs {p.source}", text)
        if p.model_differs and not inp.force:
            plan.problems.append(
                f"release drift: {inp.target} serves a different model than {p.source}: "
                f"{'; '.join(p.drift)} (use --force to override)"
            )


async def migrate_artifacts(phases: Phases, req: MigrationRequest) -> ArtifactsResult:
    """Copy the model artifacts into the target with rclone and verify them, before any restore or
    traffic: a target restored without its model would fail every request it is sent."""
    phases.enter(
        "artifacts", f"rclone copy of model artifacts `{req.source}` → `{req.target}`, then rclone check"
    )
    try:
        got = await calls.copy_artifacts(
            ArtifactsInput(source=req.source, target=req.target),
            queue=req.spec.region(req.target).queue,
            summary=f"copy artifacts {req.source} → {req.target}",
        )
    except ActivityError as exc:
        raise Stop(Outcome.FAILED, f"model artifacts not copied, nothing changed: {cause_of(exc)}") from exc
    runs = ", ".join(
        f"{r.bucket}: {r.stats.transfers} objects, {r.stats.bytes} bytes, "
        f"check {'ok' if r.check_ok else 'FAILED'}"
        for r in got.runs
    )
    phases.note("artifacts", runs or "no bucket replicates into the target")
    if not got.verified:
        bad = [
            f"{r.bucket}: {r.error or f'{r.lag.unreplicated} object(s) differ'}"
            for r in got.runs
            if not (r.ok and r.check_ok)
        ]
        raise Stop(Outcome.FAILED, f"model artifacts in {req.target} failed verification: {'; '.join(bad)}")
    return got
