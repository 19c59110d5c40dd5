"""Migration: claim → back up the source → back up the target (the rollback point) → wait until the
target's Velero lists the source's backup (backup sync) → restore it into the target with namespace
mapping → scale, wait ready, warm up → shift global traffic in steps with analysis (target vs source,
same window) → optionally decommission the source.

Any failure or abort before the end puts the global weights back and restores the target's own
backup, so the target cluster returns to what it was.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl.models import phases
    from drctl.models import search_attributes as sa
    from drctl.models.activity_io import RegionRequest, ScaleInput, WaitRolloutInput
    from drctl.models.analysis import AnalysisRequest, TrackRef
    from drctl.models.backup import BackupInfo, BackupName, BackupRequest, RestoreRequest
    from drctl.models.failover import cap_weights
    from drctl.models.gitops import note_all
    from drctl.models.migration import MigrationRequest, MigrationResult, MigrationStatus
    from drctl.models.upgrade import Outcome, WarmupRequest, failure
    from workflows import calls, global_weights
    from workflows.common import fmt_weights
    from workflows.operation import cause_of
    from workflows.progressive import Progressive, Stop
    from workflows.rpo import MIGRATE_PATCH as MIGRATE_ARTIFACTS
    from workflows.rpo import migrate_artifacts

# Migrations recorded before the sync wait existed replay without it.
WAIT_SYNC = "migrate-wait-backup-sync"


def step_weights(before: dict[str, int], source: str, target: str, pct: int) -> dict[str, int]:
    """Move pct % of the source's weight to the target; other regions keep theirs."""
    moved = round(before[source] * pct / 100)
    # Capped like a failover's shift: the target's weight plus the moved share can pass 255.
    return cap_weights({**before, source: before[source] - moved, target: before.get(target, 0) + moved})


@workflow.defn(name="Migration")
class Migration(Progressive):
    OPERATION, TITLE = "migrate", "Migration"

    def __init__(self) -> None:
        super().__init__()
        self.state = MigrationStatus()
        # The target's size before the migration scaled it up; None until read (nothing scaled yet).
        self.target_replicas_before: int | None = None
        # What a rollback puts back: the weights before the first shift, the target's own backup.
        self.weights_before: dict[str, int] | None = None
        self.rollback_point: str | None = None

    @workflow.query(name="status")
    def status(self) -> MigrationStatus:
        return self.state.model_copy(update={"phase": self.phases.phase})

    def abort_refused(self) -> str | None:
        if self.phases.phase == "decommission" and not self.finished:
            return "traffic has fully moved and the source is being decommissioned"
        return super().abort_refused()

    @staticmethod
    def _q(req: MigrationRequest, region: str) -> str:
        return req.spec.region(region).queue

    async def _backup(self, req: MigrationRequest, region: str, name: str, ns: str) -> BackupInfo:
        return await self.abortable(
            calls.create_backup(
                BackupRequest(region=region, name=name, namespaces=[ns], label_selector={"app": req.app}),
                queue=self._q(req, region),
                summary=f"backup {name} in {region}",
            )
        )

    async def _restore(
        self, req: MigrationRequest, name: str, backup: str, mapping: dict[str, str]
    ) -> BackupInfo:
        return await calls.restore_backup(
            RestoreRequest(
                region=req.target,
                name=name,
                backup_name=backup,
                namespace_mapping=mapping,
                existing_resource_policy="update",
            ),
            queue=self._q(req, req.target),
            summary=f"restore {backup} into {req.target}",
        )

    async def _weights(self, req: MigrationRequest, weights: dict[str, int], why: str) -> dict[str, int]:
        # Waits for INSYNC (bounded): the migration's next step must see the traffic where it was sent.
        got = await global_weights.apply_and_wait(
            req.spec.region(req.target).queue,
            weights,
            why,
            f"global weights {fmt_weights(weights)}",
            req.spec.global_propagation_timeout_s,
        )
        self.state.weights = got.weights
        self.phases.note("global weights", fmt_weights(got.weights))
        return got.weights

    @workflow.run
    async def run(self, req: MigrationRequest) -> MigrationResult:
        return await self.conclude(self._run(req), lambda res: failure("migration", res.outcome, res.reason))

    async def _run(self, req: MigrationRequest) -> MigrationResult:
        self.phases.title = f"Migration of `{req.spec.fleet}` from `{req.source}` to `{req.target}`"
        res = MigrationResult(
            migration_id=req.migration_id,
            source=req.source,
            target=req.target,
            outcome=Outcome.FAILED,
            reason="",
        )
        workflow.upsert_search_attributes(
            [sa.SOURCE_REGION.value_set(req.source), sa.TARGET_REGION.value_set(req.target)]
        )
        try:
            await self.claim(req.spec.fleet)
            await self._move(req, res)
            res.outcome, res.reason = Outcome.SUCCEEDED, f"workload and traffic moved to {req.target}"
        except Stop as stop:
            res.outcome, res.reason, res.failed_metric = stop.outcome, stop.reason, stop.metric
        except (ActivityError, ApplicationError) as exc:
            # Refused by the lock: never held the fleet, nothing was changed, nothing is rolled back.
            res.outcome, res.reason = Outcome.FAILED if self.busy else Outcome.ROLLED_BACK, cause_of(exc)
        if res.outcome is not Outcome.SUCCEEDED:
            res.failed_step = self.phases.phase
        if res.outcome is Outcome.PREEMPTED:
            self._yielded(req, res, self.weights_before)
        elif res.outcome not in (Outcome.SUCCEEDED, Outcome.BACKUP_FAILED) and not self.busy:
            await self._rollback(req, res, self.weights_before, self.rollback_point)
        await self.finish(
            res.outcome.value, f"{res.outcome.value}: {res.reason}", ok=res.outcome is Outcome.SUCCEEDED
        )
        return res

    async def _move(self, req: MigrationRequest, res: MigrationResult) -> None:
        """The phases: artifacts, backups, restore, ready, traffic steps, decommission."""
        if workflow.patched(MIGRATE_ARTIFACTS):
            res.artifacts = await migrate_artifacts(self.phases, req)
        self.phases.enter(
            "backup", f"Velero backup of `{req.namespace}` in `{req.source}`, and of the target"
        )
        name = f"migrate-{req.migration_id}"
        try:
            res.backup = self.state.backup = await self._backup(req, req.source, name, req.namespace)
            await self._backup(req, req.target, f"{name}-rollback", req.target_namespace)
        except (ActivityError, ApplicationError) as exc:
            raise Stop(Outcome.BACKUP_FAILED, f"backup failed, nothing changed: {cause_of(exc)}") from exc
        self.rollback_point = f"{name}-rollback"
        if workflow.patched(WAIT_SYNC):
            # The target's Velero knows a backup taken in the source's cluster only once its backup
            # sync has imported it; a Restore created before that ends FailedValidation.
            waiting = f"waiting for {req.target} to sync backup {name}"
            self.phases.enter("sync", waiting)
            await self.abortable(
                calls.wait_backup_synced(
                    BackupName(region=req.target, name=name), queue=self._q(req, req.target), summary=waiting
                )
            )
        self.phases.enter("restore", f"restore into `{req.target}` as `{req.target_namespace}`")
        mapping = {req.namespace: req.target_namespace} if req.namespace != req.target_namespace else {}
        res.restore = self.state.restore = await self._restore(req, name, name, mapping)
        await self._ready(req, res)
        self.weights_before = before = (
            await calls.get_global_weights(queue=self._q(req, req.target))
        ).weights
        for pct in req.steps_percent:
            self.ctl.check_abort()
            self.phases.enter(f"shift-{pct}", f"{pct} % of `{req.source}`'s traffic to `{req.target}`")
            res.weights = await self._weights(
                req, step_weights(before, req.source, req.target, pct), f"migrate {pct} %"
            )
            self.state.step_percent = pct
            await self.ctl.analyse(
                AnalysisRequest(
                    candidate=TrackRef(region=req.target, track="stable"),
                    baseline=TrackRef(region=req.source, track="stable"),
                    window_s=req.step_pause_s,
                    limits=req.limits,
                ),
                self._q(req, req.target),
                3,
                self.state.analyses,
            )
        if req.decommission_source:
            self.phases.enter("decommission", f"scaling `{req.source}` to zero")
            scaled = await calls.scale_deployment(
                ScaleInput(region=req.source, replicas=0, deployment=f"{req.app}-stable"),
                queue=self._q(req, req.source),
                summary=f"decommission {req.source}",
            )
            res.decommissioned = True
            note_all(res.gitops_managed, scaled.scale_changes())

    def _yielded(self, req: MigrationRequest, res: MigrationResult, weights: dict[str, int] | None) -> None:
        """Preempted by a failover: stop, and touch nothing the failover now relies on.

        Putting the global weights back would undo the failover's shift, and restoring or scaling
        down the target could take away the capacity it is moving traffic onto. What is left is
        written down for the operator, who reruns the migration once the fleet is healthy.
        """
        self.phases.enter(phases.PHASE_COMPENSATE, f"yielding after `{res.failed_step}`: {res.reason}")
        if weights is not None:
            res.rollback.append(
                f"global weights left to the failover (before the migration: {fmt_weights(weights)})"
            )
        else:
            res.rollback.append("global weights untouched: traffic had not moved yet")
        if self.target_replicas_before is not None:
            res.rollback.append(
                f"{req.target} left at its migration size (was {self.target_replicas_before} "
                "replicas), restored workload kept: the failover may need it"
            )
        self.phases.note("yielded", "; ".join(res.rollback))

    async def _ready(self, req: MigrationRequest, res: MigrationResult) -> None:
        """The target carries its own share plus the source's: scale it, wait, warm it up."""
        replicas = min(
            req.spec.region(req.target).max_replicas,
            req.spec.region(req.target).replicas + req.spec.region(req.source).replicas,
        )
        name = f"{req.app}-stable"
        self.phases.enter("ready", f"`{req.target}` to {replicas} replicas, ready and warm")
        queue = self._q(req, req.target)
        before = await calls.get_capacity(
            RegionRequest(region=req.target), queue=queue, summary=f"read {req.target}'s size before scaling"
        )
        self.target_replicas_before = before.replicas
        scaled = await calls.scale_deployment(
            ScaleInput(region=req.target, replicas=replicas, deployment=name),
            queue=queue,
            summary=f"scale {req.target} to {replicas}",
        )
        note_all(res.gitops_managed, scaled.scale_changes())
        await self.abortable(
            calls.wait_rollout(
                WaitRolloutInput(region=req.target, timeout_s=req.spec.rollout_timeout_s, deployment=name),
                queue=queue,
                summary=f"wait for {name} in {req.target}",
            )
        )
        warm = await self.abortable(
            calls.warm_up(
                WarmupRequest(region=req.target, track="stable", prompts=req.warmup_prompts),
                queue=queue,
                summary=f"warm up {req.target}",
            )
        )
        self.phases.note("warm-up", f"{warm.ok} ok / {warm.failed} failed on {warm.replicas} replicas")

    async def _rollback(
        self,
        req: MigrationRequest,
        res: MigrationResult,
        weights: dict[str, int] | None,
        rollback_point: str | None,
    ) -> None:
        """Traffic first (users first), then the target cluster. Each step runs even when the one
        before it failed, and the result records what each did, so an operator knows what is left."""
        self.phases.enter(phases.PHASE_COMPENSATE, f"rolling back after `{res.failed_step}`: {res.reason}")
        if weights is None:
            res.rollback.append("global weights untouched: traffic had not moved yet")
        else:
            try:
                res.weights = await self._weights(req, weights, "migration rollback")
                res.rollback.append(
                    f"global weights back to {fmt_weights(res.weights)} (before the migration)"
                )
            except (ActivityError, ApplicationError) as exc:
                res.outcome = Outcome.FAILED
                res.rollback.append(
                    f"FAILED to put global weights back to {fmt_weights(weights)}: {cause_of(exc)}"
                )
        if self.target_replicas_before is not None:
            # Scale down before the restore: the raised HPA minReplicas would otherwise hold the
            # restored Deployment at the migration's size (a restore only re-applies specs).
            n = self.target_replicas_before
            try:
                scaled = await calls.scale_deployment(
                    ScaleInput(region=req.target, replicas=n, deployment=f"{req.app}-stable"),
                    queue=self._q(req, req.target),
                    summary=f"scale {req.target} back to {n}",
                )
                res.rollback.append(f"{req.target} scaled back to {n} replicas")
                note_all(res.gitops_managed, scaled.scale_changes())
            except (ActivityError, ApplicationError) as exc:
                res.outcome = Outcome.FAILED
                res.rollback.append(f"FAILED to scale {req.target} back to {n} replicas: {cause_of(exc)}")
        if rollback_point is None:
            res.rollback.append(f"{req.target} untouched: nothing had been restored there")
        else:
            name = f"{rollback_point}-{workflow.uuid4().hex[:6]}"
            try:
                done = await self._restore(req, name, rollback_point, {})
                res.rollback.append(
                    f"{req.target} restored from its own backup {rollback_point} "
                    f"(restore {done.name}: {done.phase}, {done.items} items)"
                )
            except (ActivityError, ApplicationError) as exc:
                res.outcome = Outcome.FAILED
                res.rollback.append(f"FAILED to restore {req.target} from {rollback_point}: {cause_of(exc)}")
        self.phases.note("rollback", "; ".join(res.rollback))


WORKFLOWS = [Migration]
