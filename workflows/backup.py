"""Backup (`backup/<fleet>/<name>`) and Restore (`restore/<fleet>/<name>`): one Velero object each,
run durably on the region's own task queue so `drctl backup create` and `drctl restore` show in the
Temporal UI and survive a CLI that goes away.

A backup changes no workload, so it runs beside any operation. A restore overwrites workload
objects, so it claims the fleet like every other mutating operation. It first waits (phase `sync`)
until the region's Velero lists the backup: one taken in another cluster appears there only after
Velero's backup sync, and a Restore created before that fails validation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl.models import search_attributes as sa
    from drctl.models.backup import BackupInfo, BackupJob, BackupJobResult, BackupName, RestoreJob
    from drctl.models.lock import SIGNAL_PREEMPT, PreemptNotice
    from drctl.models.outcome import failed
    from workflows import calls
    from workflows.operation import Operation, cause_of, innermost

# Restores recorded before the sync wait existed replay without it.
RESTORE_WAIT_SYNC = "restore-wait-backup-sync"


def _last_state(exc: BaseException) -> BackupInfo | None:
    """The object's last state, which the backup activities attach to a policy failure."""
    exc = innermost(exc)
    if isinstance(exc, ApplicationError) and exc.details and isinstance(exc.details[0], dict):
        return BackupInfo.model_validate(exc.details[0])
    return None


class _Velero(Operation):
    """One Velero object, watched to its end: the phase, verdict and result are the same for both."""

    def abort_refused(self) -> str | None:
        # Velero has no cancel: stopping half-way would leave a partial backup or a mix of objects.
        return f"a {self.OPERATION} cannot be aborted: Velero runs it to the end"

    async def _velero(
        self,
        call: Callable[[], Awaitable[BackupInfo]],
        name: str,
        region: str,
        summary: str,
        sync: tuple[str, Callable[[], Awaitable[BackupInfo]]] | None = None,
    ) -> BackupJobResult:
        """Run `call` in the operation's phase, after `sync` (its phase details and the wait) if given."""
        kind = self.TITLE
        try:
            if sync is not None:
                self.phases.enter("sync", sync[0])
                await sync[1]()
            self.phases.enter(self.OPERATION, summary)
            info = await call()
        except (ActivityError, ApplicationError) as exc:
            res = BackupJobResult(
                kind=kind,
                name=name,
                region=region,
                ok=False,
                reason=cause_of(exc),  # type: ignore[arg-type]
                info=_last_state(exc),
            )
        else:
            res = BackupJobResult(
                kind=kind,
                name=name,
                region=region,
                ok=True,
                info=info,  # type: ignore[arg-type]
                reason=f"{self.OPERATION} {name} in {region}: {info.phase}, {info.items} items",
            )
        if res.info is not None:
            self.phases.note(
                self.OPERATION,
                f"{res.info.name}: {res.info.phase or 'New'}, {res.info.items} items, "
                f"{res.info.errors} errors, {res.info.warnings} warnings",
            )
        verdict = "SUCCEEDED" if res.ok else "FAILED"
        await self.finish(verdict, f"{verdict}: {res.reason}", ok=res.ok)
        return res


@workflow.defn(name="Backup")
class Backup(_Velero):
    OPERATION, TITLE = "backup", "Backup"

    @workflow.run
    async def run(self, job: BackupJob) -> BackupJobResult:
        req = job.request
        self.phases.title = f"Velero backup `{req.name}` of `{', '.join(req.namespaces)}` in `{req.region}`"
        workflow.upsert_search_attributes([sa.TARGET_REGION.value_set(req.region)])
        summary = f"backup {req.name} in {req.region}"
        res = await self._velero(
            lambda: calls.create_backup(req, queue=job.queue, summary=summary), req.name, req.region, summary
        )
        if not res.ok:
            raise failed(f"backup {req.name} failed: {res.reason}", res)
        return res


@workflow.defn(name="Restore")
class Restore(_Velero):
    OPERATION, TITLE = "restore", "Restore"

    def __init__(self) -> None:
        super().__init__()
        self.yielded_to: str | None = None

    @workflow.signal(name=SIGNAL_PREEMPT)
    def preempt(self, notice: PreemptNotice) -> None:
        # A Velero restore moves no traffic and cannot be stopped half-way without leaving a mix of
        # objects, so it finishes beside the failover; the result says it yielded the fleet.
        self.yielded_to = notice.reason
        self.phases.note("yielded", notice.reason)

    @workflow.run
    async def run(self, job: RestoreJob) -> BackupJobResult:
        req = job.request
        self.phases.title = f"Velero restore of `{req.backup_name}` into `{req.region}`"
        workflow.upsert_search_attributes([sa.TARGET_REGION.value_set(req.region)])
        try:
            await self.claim(job.fleet)
        except (ActivityError, ApplicationError) as exc:
            res = BackupJobResult(
                kind="Restore", name=req.name, region=req.region, ok=False, reason=cause_of(exc)
            )
            await self.finish("FAILED", f"FAILED: {res.reason}", ok=False)
            raise failed(f"restore {req.name} refused: {res.reason}", res, busy=self.busy) from None
        summary = f"restore {req.backup_name} into {req.region} as {req.name}"
        sync = None
        if workflow.patched(RESTORE_WAIT_SYNC):
            waiting = f"waiting for {req.region} to sync backup {req.backup_name}"
            sync = (
                waiting,
                lambda: calls.wait_backup_synced(
                    BackupName(region=req.region, name=req.backup_name), queue=job.queue, summary=waiting
                ),
            )
        try:
            res = await self._velero(
                lambda: calls.restore_backup(req, queue=job.queue, summary=summary),
                req.name,
                req.region,
                summary,
                sync,
            )
        finally:
            await self.release()
        if self.yielded_to:
            res.reason += f"; yielded the fleet: {self.yielded_to}"
        if not res.ok:
            raise failed(f"restore {req.name} failed: {res.reason}", res)
        return res


WORKFLOWS = [Backup, Restore]
