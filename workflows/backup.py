"""Backup (`backup/<fleet>/<name>`) and Restore (`restore/<fleet>/<name>`): one Velero object each,
run durably on the region's own task queue so `drctl backup create` and `drctl restore` show in the
Temporal UI and survive a CLI that goes away.

A backup changes no workload, so it runs beside any operation. A restore overwrites workload
objects, so it claims the fleet like every other mutating operation.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl import search_attributes as sa
    from drctl.models import ops
    from drctl.models.backup import BackupInfo, BackupJob, BackupJobResult, RestoreJob
    from drctl.models.lock import SIGNAL_PREEMPT, PreemptNotice
    from drctl.models.ops import FLEET_BUSY, OperationProgress
    from drctl.outcome import failed
    from workflows.common import Phases, region_bound
    from workflows.lock import acquire_fleet, release_fleet
    from workflows.progressive import error_type, reason_of


def _last_state(exc: BaseException) -> BackupInfo | None:
    """The object's last state, which the backup activities attach to a policy failure."""
    while isinstance(exc, ActivityError) and exc.cause is not None:
        exc = exc.cause
    if isinstance(exc, ApplicationError) and exc.details and isinstance(exc.details[0], dict):
        return BackupInfo.model_validate(exc.details[0])
    return None


async def _run_velero(phases: Phases, activity: str, arg: Any, queue: str, kind: str, name: str,
                      region: str, summary: str) -> BackupJobResult:
    phases.enter(kind.lower(), summary)
    try:
        # Velero itself is the slow part; the activity heartbeats every poll, so a lost worker
        # shows within 30 s. The create is idempotent by name, so a retry re-attaches to it.
        info: BackupInfo = await workflow.execute_activity(
            activity, arg, result_type=BackupInfo, summary=summary, heartbeat_timeout=timedelta(seconds=30),
            **region_bound(queue, 900))
    except (ActivityError, ApplicationError) as exc:
        last = _last_state(exc)
        res = BackupJobResult(kind=kind, name=name, region=region, ok=False, reason=reason_of(exc), info=last)  # type: ignore[arg-type]
    else:
        res = BackupJobResult(kind=kind, name=name, region=region, ok=True, info=info,  # type: ignore[arg-type]
                              reason=f"{kind.lower()} {name} in {region}: {info.phase}, {info.items} items")
    if res.info is not None:
        phases.note(kind.lower(), f"{res.info.name}: {res.info.phase or 'New'}, {res.info.items} items, "
                                  f"{res.info.errors} errors, {res.info.warnings} warnings")
    verdict = "SUCCEEDED" if res.ok else "FAILED"
    phases.finish(ops.PHASE_DONE if res.ok else ops.PHASE_FAILED, f"{verdict}: {res.reason}")
    workflow.upsert_search_attributes([sa.VERDICT.value_set(verdict)])
    return res


@workflow.defn(name="Backup")
class Backup:
    def __init__(self) -> None:
        self.phases = Phases("backup", "Backup")

    @workflow.query(name=ops.QUERY_PROGRESS)
    def progress(self) -> OperationProgress:
        return self.phases.progress()

    @workflow.run
    async def run(self, job: BackupJob) -> BackupJobResult:
        req = job.request
        self.phases.title = f"Velero backup `{req.name}` of `{', '.join(req.namespaces)}` in `{req.region}`"
        workflow.upsert_search_attributes([sa.TARGET_REGION.value_set(req.region)])
        res = await _run_velero(self.phases, "create_backup", req, job.queue, "Backup", req.name, req.region,
                                f"backup {req.name} in {req.region}")
        if not res.ok:
            raise failed(f"backup {req.name} failed: {res.reason}", res)
        return res


@workflow.defn(name="Restore")
class Restore:
    def __init__(self) -> None:
        self.phases = Phases("restore", "Restore")
        self.yielded_to: str | None = None

    @workflow.signal(name=SIGNAL_PREEMPT)
    def preempt(self, notice: PreemptNotice) -> None:
        # A Velero restore moves no traffic and cannot be stopped half-way without leaving a mix of
        # objects, so it finishes beside the failover; the result says it yielded the fleet.
        self.yielded_to = notice.reason
        self.phases.note("yielded", notice.reason)

    @workflow.query(name=ops.QUERY_PROGRESS)
    def progress(self) -> OperationProgress:
        return self.phases.progress()

    @workflow.run
    async def run(self, job: RestoreJob) -> BackupJobResult:
        req = job.request
        self.phases.title = f"Velero restore of `{req.backup_name}` into `{req.region}`"
        workflow.upsert_search_attributes([sa.TARGET_REGION.value_set(req.region)])
        self.phases.enter(ops.PHASE_CLAIM, f"taking the lock of fleet {job.fleet}")
        try:
            await acquire_fleet(job.fleet, "restore")
        except (ActivityError, ApplicationError) as exc:
            res = BackupJobResult(kind="Restore", name=req.name, region=req.region, ok=False, reason=reason_of(exc))
            self.phases.finish(ops.PHASE_FAILED, f"FAILED: {res.reason}")
            workflow.upsert_search_attributes([sa.VERDICT.value_set("FAILED")])
            raise failed(f"restore {req.name} refused: {res.reason}", res, busy=error_type(exc) == FLEET_BUSY) from None
        try:
            res = await _run_velero(self.phases, "restore_backup", req, job.queue, "Restore", req.name, req.region,
                                    f"restore {req.backup_name} into {req.region} as {req.name}")
        finally:
            await release_fleet(job.fleet)
        if self.yielded_to:
            res.reason += f"; yielded the fleet: {self.yielded_to}"
        if not res.ok:
            raise failed(f"restore {req.name} failed: {res.reason}", res)
        return res


WORKFLOWS = [Backup, Restore]
