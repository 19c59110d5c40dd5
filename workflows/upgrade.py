"""Upgrade: claim → read each region's release → backup every region → per region (one wave at a
time, `workflows.upgrade_wave`): canary steps or blue-green switch, with analysis → promote; any
failure or abort rolls that region back. Regions already promoted keep the new release, and the
result lists what every region ended on.

Region-bound calls (Kubernetes, Velero, the region gateway, synthetic traffic) run on that
region's task queue, so each one is served by a worker that can reach that region.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl.models.activity_io import RegionRequest
    from drctl.models.backup import BackupRequest
    from drctl.models.upgrade import (
        ControlAck,
        OperatorAction,
        Outcome,
        UpgradeRequest,
        UpgradeResult,
        UpgradeStatus,
        failure,
    )
    from workflows import calls
    from workflows.approval import ApprovalReminder
    from workflows.notify import Notifier
    from workflows.operation import cause_of
    from workflows.progressive import Progressive, Stop
    from workflows.upgrade_wave import WaveSteps, ended_on


@workflow.defn(name="Upgrade")
class Upgrade(Progressive):
    OPERATION, TITLE = "upgrade", "Upgrade"

    def __init__(self) -> None:
        super().__init__()
        self.state = UpgradeStatus()
        self.steps = WaveSteps(self.phases, self.ctl, self.state)

    # --- queries and updates (progress and abort: Operation) ------------------------------------

    @workflow.query(name="status")
    def status(self) -> UpgradeStatus:
        return self.state.model_copy(
            update={
                "phase": self.phases.phase,
                "paused": self.ctl.paused,
                "pause_reason": self.ctl.pause_reason,
                "awaiting_approval": self.phases.awaiting_approval,
            }
        )

    def on_abort(self) -> str:
        return f"abort requested in phase {self.phases.phase}; rolling back {self.state.region or ''}".strip()

    def abort_refused(self) -> str | None:
        return super().abort_refused() or ("an abort is already under way" if self.abort_reason else None)

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

    # --- run ------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, req: UpgradeRequest) -> UpgradeResult:
        return await self.conclude(self._run(req), lambda res: failure("upgrade", res.outcome, res.reason))

    async def _run(self, req: UpgradeRequest) -> UpgradeResult:
        self.phases.title = f"Upgrade of `{req.spec.fleet}` to `{req.release.image}` ({req.strategy.value})"
        res = UpgradeResult(
            upgrade_id=req.upgrade_id,
            image=req.release.image,
            strategy=req.strategy,
            outcome=Outcome.FAILED,
            reason="",
        )
        try:
            await self.claim(req.spec.fleet)
            await self._read_releases(req)
            await self._backups(req, res)
            for i, region in enumerate(req.regions):
                if i > 0 and req.approval_between_regions:
                    self.approved_by = None  # each region is approved on its own
                    await self.await_approval(
                        f"waiting for `drctl ops approve` before upgrading {region}",
                        req.spec.approval_timeout_s,
                        ApprovalReminder(
                            Notifier(req.spec),
                            f"upgrade to {req.release.image} before {region}",
                            req.spec.approval_reminder_s,
                        ),
                    )
                self.ctl.check_abort()
                await self.steps.run(req, region, res)
            res.outcome, res.reason = (
                Outcome.SUCCEEDED,
                f"{req.release.image} is stable in {', '.join(req.regions)}",
            )
        except Stop as stop:
            res.outcome, res.reason, res.failed_metric = stop.outcome, stop.reason, stop.metric
        except (ActivityError, ApplicationError) as exc:
            res.reason = cause_of(exc)
        res.waves = self.state.waves
        res.releases = ended_on(req, res.waves, self.steps.before)
        kept = [r.region for r in res.releases if r.state == "upgraded"]
        if res.outcome is not Outcome.SUCCEEDED and kept:
            # A mixed fleet must be impossible to miss: earlier waves were proven and stay upgraded.
            res.reason += f"; {', '.join(kept)} already promoted, still on {req.release.image} (mixed fleet)"
        res.gitops_managed = list(self.steps.gitops_managed)
        await self.finish(
            res.outcome.value, f"{res.outcome.value}: {res.reason}", ok=res.outcome is Outcome.SUCCEEDED
        )
        await Notifier(req.spec).upgrade_ended(res)
        return res

    async def _read_releases(self, req: UpgradeRequest) -> None:
        """Every region's stable release before anything changes: what a rollback puts back, and
        what the result reports for regions the upgrade leaves on the old release."""
        self.phases.enter("preflight", "reading each region's current release")
        for region in req.regions:
            self.steps.before[region] = await calls.get_stable_release(
                RegionRequest(region=region),
                queue=req.spec.region(region).queue,
                summary=f"read stable release in {region}",
            )

    # --- backup gate ----------------------------------------------------------------------------

    async def _backups(self, req: UpgradeRequest, res: UpgradeResult) -> None:
        self.phases.enter("backup", f"Velero backup of {', '.join(req.regions)} before anything changes")
        for region in req.regions:
            name = f"upgrade-{req.upgrade_id}-{region}"
            breq = BackupRequest(
                region=region, name=name, namespaces=[req.namespaces[region]], label_selector={"app": req.app}
            )
            try:
                backup = await self.abortable(
                    calls.create_backup(breq, queue=req.spec.region(region).queue, summary=f"backup {name}")
                )
            except (ActivityError, ApplicationError) as exc:
                # The gate: nothing has been changed yet, and nothing will be.
                raise Stop(Outcome.BACKUP_FAILED, f"backup failed, nothing changed: {cause_of(exc)}") from exc
            res.backup = self.state.backup = backup
            self.phases.note(f"backup {region}", f"{backup.name}: {backup.phase}, {backup.items} items")


WORKFLOWS = [Upgrade]
