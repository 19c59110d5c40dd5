"""Upgrade: claim → read each region's release → backup every region → per region (one wave at a
time, `workflows.upgrade_wave`): canary steps or blue-green switch, with analysis → promote; any
failure or abort rolls that region back. Regions already promoted keep the new release, and the
result lists what every region ended on.

Region-bound calls (Kubernetes, Velero, the region gateway, synthetic traffic) run on that
region's task queue, so each one is served by a worker that can reach that region.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl import search_attributes as sa
    from drctl.models import ops
    from drctl.models.backup import BackupInfo, BackupRequest
    from drctl.models.lock import SIGNAL_PREEMPT, PreemptNotice
    from drctl.models.ops import (
        AbortInput,
        ApproveInput,
        OperationProgress,
        RegionRequest,
    )
    from drctl.models.upgrade import (
        ControlAck,
        OperatorAction,
        Outcome,
        Release,
        UpgradeRequest,
        UpgradeResult,
        UpgradeStatus,
    )
    from drctl.outcome import failed
    from workflows.common import Phases, region_bound
    from workflows.lock import acquire_fleet, release_fleet
    from workflows.notify import Notifier
    from workflows.progressive import Control, Stop, error_type, reason_of
    from workflows.upgrade_wave import WaveSteps, ended_on


@workflow.defn(name="Upgrade")
class Upgrade:
    def __init__(self) -> None:
        self.phases = Phases("upgrade", "Upgrade")
        self.ctl = Control(self.phases)
        self.state = UpgradeStatus()
        self.steps = WaveSteps(self.phases, self.ctl, self.state)
        self.busy = False

    # --- queries and updates --------------------------------------------------------------------

    @workflow.query(name=ops.QUERY_PROGRESS)
    def progress(self) -> OperationProgress:
        return self.phases.progress()

    @workflow.query(name="status")
    def status(self) -> UpgradeStatus:
        return self.state.model_copy(update={
            "phase": self.phases.phase, "paused": self.ctl.paused, "pause_reason": self.ctl.pause_reason,
            "awaiting_approval": self.phases.awaiting_approval,
        })

    @workflow.update(name=ops.UPDATE_ABORT)
    def abort(self, inp: AbortInput) -> str:
        self.ctl.abort_reason = f"{inp.reason} (by {inp.by})"
        return f"abort requested in phase {self.phases.phase}; rolling back {self.state.region or ''}".strip()

    @abort.validator
    def _validate_abort(self, inp: AbortInput) -> None:
        self.ctl.check_running()
        if self.ctl.abort_reason:
            raise ValueError("an abort is already under way")

    @workflow.update(name="promote")
    def promote(self, inp: OperatorAction) -> ControlAck:
        self.ctl.promote_requested = True
        return ControlAck(accepted=True, message=f"promoting {self.state.region} now (by {inp.by})")

    @promote.validator
    def _validate_promote(self, inp: OperatorAction) -> None:
        self.ctl.check_running()
        if not self.steps.candidate_live:
            raise ValueError(f"nothing to promote in phase {self.phases.phase}: no candidate is serving yet")
        if self.ctl.promote_requested or self.ctl.abort_reason:
            raise ValueError("a promote or abort is already under way")

    @workflow.update(name="pause")
    def pause(self, inp: OperatorAction) -> ControlAck:
        self.ctl.pause(inp.reason or f"paused by {inp.by}")
        return ControlAck(accepted=True, message="the upgrade holds at the next step boundary")

    @pause.validator
    def _validate_pause(self, inp: OperatorAction) -> None:
        self.ctl.check_running()
        if self.ctl.paused:
            raise ValueError("already paused")

    @workflow.update(name="resume")
    def resume(self, inp: OperatorAction) -> ControlAck:
        self.ctl.resume()
        return ControlAck(accepted=True, message="resumed")

    @resume.validator
    def _validate_resume(self, inp: OperatorAction) -> None:
        self.ctl.check_running()
        if not self.ctl.paused:
            raise ValueError("not paused")

    @workflow.signal(name=SIGNAL_PREEMPT)
    def preempt(self, notice: PreemptNotice) -> None:
        # Sent by the fleet lock: DR comes first, so the current wave rolls back and the upgrade ends.
        if not self.ctl.finished:
            self.ctl.preempt(notice.reason)

    @workflow.update(name=ops.UPDATE_APPROVE)
    def approve(self, inp: ApproveInput) -> str:
        self.ctl.approved_by = inp.approver
        return f"approved by {inp.approver}"

    @approve.validator
    def _validate_approve(self, inp: ApproveInput) -> None:
        if not self.phases.awaiting_approval:
            raise ValueError(f"nothing to approve: phase {self.phases.phase}")

    # --- run ------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, req: UpgradeRequest) -> UpgradeResult:
        locked = False
        try:
            res, locked = await self._run(req)
        finally:
            if locked:
                await release_fleet(req.spec.fleet)
        await workflow.wait_condition(workflow.all_handlers_finished)
        if res.outcome is not Outcome.SUCCEEDED:
            raise failed(f"upgrade {res.outcome.value}: {res.reason}", res, busy=self.busy)
        return res

    async def _run(self, req: UpgradeRequest) -> tuple[UpgradeResult, bool]:
        locked = False
        self.phases.title = f"Upgrade of `{req.spec.fleet}` to `{req.release.image}` ({req.strategy.value})"
        res = UpgradeResult(upgrade_id=req.upgrade_id, image=req.release.image, strategy=req.strategy,
                            outcome=Outcome.FAILED, reason="")
        try:
            self.phases.enter(ops.PHASE_CLAIM, f"taking the lock of fleet {req.spec.fleet}")
            await acquire_fleet(req.spec.fleet, "upgrade")
            locked = True
            await self._read_releases(req)
            await self._backups(req, res)
            for i, region in enumerate(req.regions):
                if i > 0 and req.approval_between_regions:
                    await self.ctl.approval(f"upgrading {region}", req.spec.approval_timeout_s)
                self.ctl.check_abort()
                await self.steps.run(req, region, res)
            res.outcome, res.reason = Outcome.SUCCEEDED, f"{req.release.image} is stable in {', '.join(req.regions)}"
        except Stop as stop:
            res.outcome, res.reason, res.failed_metric = stop.outcome, stop.reason, stop.metric
        except (ActivityError, ApplicationError) as exc:
            res.reason = reason_of(exc)
            self.busy = error_type(exc) == ops.FLEET_BUSY
        res.waves = self.state.waves
        res.releases = ended_on(req, res.waves, self.steps.before)
        kept = [r.region for r in res.releases if r.state == "upgraded"]
        if res.outcome is not Outcome.SUCCEEDED and kept:
            # A mixed fleet must be impossible to miss: earlier waves were proven and stay upgraded.
            res.reason += f"; {', '.join(kept)} already promoted, still on {req.release.image} (mixed fleet)"
        self.ctl.finished = True
        self.phases.finish(ops.PHASE_DONE if res.outcome is Outcome.SUCCEEDED else ops.PHASE_FAILED,
                           f"{res.outcome.value}: {res.reason}")
        workflow.upsert_search_attributes([sa.VERDICT.value_set(res.outcome.value)])
        await Notifier(req.spec).upgrade_ended(res)
        return res, locked

    async def _read_releases(self, req: UpgradeRequest) -> None:
        """Every region's stable release before anything changes: what a rollback puts back, and
        what the result reports for regions the upgrade leaves on the old release."""
        self.phases.enter("preflight", "reading each region's current release")
        for region in req.regions:
            self.steps.before[region] = await workflow.execute_activity(
                "get_stable_release", RegionRequest(region=region), result_type=Release,
                summary=f"read stable release in {region}", **region_bound(req.spec.region(region).queue))

    # --- backup gate ----------------------------------------------------------------------------

    async def _backups(self, req: UpgradeRequest, res: UpgradeResult) -> None:
        self.phases.enter("backup", f"Velero backup of {', '.join(req.regions)} before anything changes")
        for region in req.regions:
            name = f"upgrade-{req.upgrade_id}-{region}"
            breq = BackupRequest(region=region, name=name, namespaces=[req.namespaces[region]],
                                 label_selector={"app": req.app})
            try:
                backup = await self.ctl.abortable(workflow.execute_activity(
                    "create_backup", breq, result_type=BackupInfo, summary=f"backup {name}",
                    heartbeat_timeout=timedelta(seconds=30),
                    **region_bound(req.spec.region(region).queue, 600),
                ))
            except (ActivityError, ApplicationError) as exc:
                # The gate: nothing has been changed yet, and nothing will be.
                raise Stop(Outcome.BACKUP_FAILED, f"backup failed, nothing changed: {reason_of(exc)}") from exc
            res.backup = self.state.backup = backup
            self.phases.note(f"backup {region}", f"{backup.name}: {backup.phase}, {backup.items} items")


WORKFLOWS = [Upgrade]
