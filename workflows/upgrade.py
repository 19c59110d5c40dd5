"""Upgrade: claim → backup every region → per region (one wave at a time): canary steps or
blue-green switch, with analysis → promote; any failure or abort rolls the region back.

Region-bound calls (Kubernetes, Velero, the region gateway, synthetic traffic) run on that
region's task queue, so each one is served by a worker that can reach that region.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl import search_attributes as sa
    from drctl.models import ops
    from drctl.models.ops import (
        AbortInput,
        ApproveInput,
        ClaimInput,
        ClaimResult,
        DeploymentStatus,
        OperationProgress,
        RegionRequest,
        ScaleInput,
        WaitRolloutInput,
    )
    from drctl.models.upgrade import (
        AnalysisRequest,
        BackupInfo,
        BackupRequest,
        ControlAck,
        OperatorAction,
        Outcome,
        PromoteRequest,
        RegionTrackRequest,
        RegionWave,
        Release,
        Strategy,
        TrackDeployRequest,
        TrackRef,
        TrackWeightsRequest,
        UpgradeRequest,
        UpgradeResult,
        UpgradeStatus,
        WarmupRequest,
        WarmupResult,
    )
    from workflows.common import NO_RETRY, Phases, fast, region_bound
    from workflows.progressive import Control, Stop, error_type, reason_of


@workflow.defn(name="Upgrade")
class Upgrade:
    def __init__(self) -> None:
        self.phases = Phases("upgrade", "Upgrade")
        self.ctl = Control(self.phases)
        self.state = UpgradeStatus()
        self.candidate_live = False
        # Stable's release before promotion touched it, per region: a failed promotion restores it.
        self._old_releases: dict[str, Release] = {}

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
        if not self.candidate_live:
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
        info = workflow.info()
        self.phases.title = f"Upgrade of `{req.spec.fleet}` to `{req.release.image}` ({req.strategy.value})"
        res = UpgradeResult(upgrade_id=req.upgrade_id, image=req.release.image, strategy=req.strategy,
                            outcome=Outcome.FAILED, reason="")
        try:
            self.phases.enter(ops.PHASE_CLAIM, "checking no other operation holds the fleet")
            await workflow.execute_activity(
                "claim_fleet", ClaimInput(fleet=req.spec.fleet, operation="upgrade", workflow_id=info.workflow_id,
                                          run_id=info.run_id, started_at=workflow.now()),
                result_type=ClaimResult, summary=f"claim fleet {req.spec.fleet}", **fast(15),
            )
            await self._backups(req, res)
            for i, region in enumerate(req.regions):
                if i > 0 and req.approval_between_regions:
                    await self.ctl.approval(f"upgrading {region}", req.spec.approval_timeout_s)
                self.ctl.check_abort()
                await self._wave(req, region, res)
            res.outcome, res.reason = Outcome.SUCCEEDED, f"{req.release.image} is stable in {', '.join(req.regions)}"
        except Stop as stop:
            res.outcome, res.reason, res.failed_metric = stop.outcome, stop.reason, stop.metric
        except (ActivityError, ApplicationError) as exc:
            res.reason = reason_of(exc)
            if error_type(exc) == ops.FLEET_BUSY:
                res.outcome = Outcome.FAILED
        res.waves = self.state.waves
        self.ctl.finished = True
        self.phases.finish(ops.PHASE_DONE if res.outcome is Outcome.SUCCEEDED else ops.PHASE_FAILED,
                           f"{res.outcome.value}: {res.reason}")
        workflow.upsert_search_attributes([sa.VERDICT.value_set(res.outcome.value)])
        await workflow.wait_condition(workflow.all_handlers_finished)
        return res

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

    # --- one region -----------------------------------------------------------------------------

    async def _wave(self, req: UpgradeRequest, region: str, res: UpgradeResult) -> None:
        wave = RegionWave(region=region)
        self.state.waves.append(wave)
        self.state.region = region
        self.ctl.promote_requested = False
        workflow.upsert_search_attributes([sa.TARGET_REGION.value_set(region)])
        track = "canary" if req.strategy is Strategy.CANARY else "green"
        try:
            if req.strategy is Strategy.CANARY:
                await self._canary(req, region, wave)
            else:
                await self._blue_green(req, region, wave)
        except Stop as stop:
            wave.outcome, wave.reason = stop.outcome, stop.reason
            res.failed_region = region
            await self._rollback(req, region, track, stop.reason)
            raise
        except (ActivityError, ApplicationError) as exc:
            wave.outcome, wave.reason = Outcome.ROLLED_BACK, reason_of(exc)
            res.failed_region = region
            await self._rollback(req, region, track, wave.reason)
            raise Stop(Outcome.ROLLED_BACK, f"{region}: {wave.reason}") from exc
        wave.outcome, wave.reason = Outcome.SUCCEEDED, f"{req.release.image} stable in {region}"

    def _q(self, req: UpgradeRequest, region: str, seconds: float = 30) -> dict[str, Any]:
        return region_bound(req.spec.region(region).queue, seconds)

    async def _weights(self, req: UpgradeRequest, region: str, weights: dict[str, int]) -> None:
        await self.ctl.abortable(workflow.execute_activity(
            "set_track_weights", TrackWeightsRequest(region=region, weights=weights), result_type=TrackWeightsRequest,
            summary=f"{region} track weights " + " / ".join(f"{k} {v}" for k, v in weights.items()),
            **self._q(req, region),
        ))
        self.phases.note(f"weights {region}", " / ".join(f"{k} {v}" for k, v in weights.items()))

    async def _ready(self, req: UpgradeRequest, region: str, track: str, replicas: int | None = None) -> None:
        name = f"{req.app}-{track}"
        if replicas is not None:
            await self.ctl.abortable(workflow.execute_activity(
                "scale_deployment", ScaleInput(region=region, replicas=replicas, deployment=name),
                result_type=DeploymentStatus, summary=f"scale {name} to {replicas}", **self._q(req, region)))
        timeout = req.spec.rollout_timeout_s
        opts = self._q(req, region, timeout + 30) | {"heartbeat_timeout": timedelta(seconds=15),
                                                     "retry_policy": NO_RETRY}
        await self.ctl.abortable(workflow.execute_activity(
            "wait_rollout", WaitRolloutInput(region=region, timeout_s=timeout, deployment=name),
            result_type=DeploymentStatus, summary=f"wait for {name} in {region}", **opts))

    async def _deploy(self, req: UpgradeRequest, region: str, track: str, replicas: int) -> None:
        self.phases.enter(f"deploy-{track}", f"`{req.app}-{track}` with `{req.release.image}` ×{replicas} in `{region}`")
        await self.ctl.abortable(workflow.execute_activity(
            "deploy_track", TrackDeployRequest(region=region, track=track, release=req.release, replicas=replicas),
            result_type=RegionTrackRequest, summary=f"deploy {track} in {region}",
            **self._q(req, region)))
        await self._ready(req, region, track)
        self.phases.enter("warm-up", f"{req.warmup_prompts} prompts per {track} replica in `{region}`")
        warm = await self.ctl.abortable(workflow.execute_activity(
            "warm_up", WarmupRequest(region=region, track=track, prompts=req.warmup_prompts),
            result_type=WarmupResult, summary=f"warm up {track} in {region}",
            heartbeat_timeout=timedelta(seconds=30), **self._q(req, region, 120)))
        self.phases.note(f"warm-up {region}", f"{warm.ok} ok / {warm.failed} failed on {warm.replicas} replicas")

    def _analysis(self, req: UpgradeRequest, region: str, track: str) -> AnalysisRequest:
        return AnalysisRequest(candidate=TrackRef(region=region, track=track),
                               baseline=TrackRef(region=region, track="stable"),
                               window_s=req.step_pause_s, limits=req.limits)

    async def _canary(self, req: UpgradeRequest, region: str, wave: RegionWave) -> None:
        full = req.spec.region(region).replicas
        current = 1
        await self._deploy(req, region, "canary", current)
        self.candidate_live = True
        for pct in req.steps_percent:
            await self.ctl.hold()
            if self.ctl.promote_requested:
                break
            needed = max(1, math.ceil(full * pct / 100))
            if needed > current:  # the canary must carry its share before it gets it
                self.phases.enter("scale-canary", f"canary to {needed} replicas for {pct} %")
                await self._ready(req, region, "canary", needed)
                current = needed
            self.phases.enter(f"step-{pct}", f"`{region}`: canary {pct} %, analysing for {req.step_pause_s:g}s")
            await self._weights(req, region, {"stable": 100 - pct, "canary": pct})
            wave.step_percent = self.state.step_percent = pct
            if await self.ctl.analyse(self._analysis(req, region, "canary"), req.spec.region(region).queue,
                                      req.max_inconclusive, wave.analyses) is None:
                break
        await self._promote(req, region, "canary")

    async def _blue_green(self, req: UpgradeRequest, region: str, wave: RegionWave) -> None:
        await self._deploy(req, region, "green", req.spec.region(region).replicas)
        self.phases.enter("preview", f"`{region}`: green in preview, compared with blue (stable)")
        self.candidate_live = True
        queue = req.spec.region(region).queue
        await self.ctl.analyse(self._analysis(req, region, "green"), queue, req.max_inconclusive, wave.analyses)
        self.ctl.check_abort()
        self.phases.enter("switch", f"`{region}`: all traffic to green; blue kept {req.scale_down_delay_s:g}s")
        await self._weights(req, region, {"stable": 0, "green": 100})
        wave.step_percent = self.state.step_percent = 100
        # Blue keeps running through the delay, so an abort or a failed check flips back at once.
        try:
            await workflow.wait_condition(lambda: self.ctl.abort_reason is not None or self.ctl.promote_requested,
                                          timeout=timedelta(seconds=req.scale_down_delay_s))
        except TimeoutError:
            pass
        self.ctl.check_abort()
        await self._promote(req, region, "green")

    async def _promote(self, req: UpgradeRequest, region: str, track: str) -> None:
        """Stable takes the new image by a rolling update, then carries all traffic again."""
        self.ctl.check_abort()
        self.phases.enter("promote", f"`{region}`: stable rolls to `{req.release.image}`, then {track} is removed")
        old = await workflow.execute_activity("get_stable_release", RegionRequest(region=region), result_type=Release,
                                              summary=f"read stable release in {region}", **self._q(req, region))
        self._old_releases[region] = old
        await self.ctl.abortable(workflow.execute_activity(
            "set_stable_release", PromoteRequest(region=region, release=req.release), result_type=Release,
            summary=f"stable to {req.release.image} in {region}", **self._q(req, region)))
        await self._ready(req, region, "stable")
        self.candidate_live = False
        await self._weights(req, region, {"stable": 100, track: 0})
        await workflow.execute_activity("remove_track", RegionTrackRequest(region=region, track=track),
                                        result_type=bool, summary=f"remove {track} in {region}",
                                        **self._q(req, region))

    async def _rollback(self, req: UpgradeRequest, region: str, track: str, why: str) -> None:
        """Weights to stable first (users first), then stable's old image if it moved, then the candidate."""
        self.phases.enter(ops.PHASE_COMPENSATE, f"rolling `{region}` back: {why}")
        self.candidate_live = False
        await workflow.execute_activity(
            "set_track_weights", TrackWeightsRequest(region=region, weights={"stable": 100, track: 0}),
            result_type=TrackWeightsRequest, summary=f"{region}: all traffic back to stable", **self._q(req, region))
        old = self._old_releases.get(region)
        if old is not None:
            await workflow.execute_activity(
                "set_stable_release", PromoteRequest(region=region, release=old), result_type=Release,
                summary=f"stable back to {old.image}", **self._q(req, region))
        await workflow.execute_activity("remove_track", RegionTrackRequest(region=region, track=track),
                                        result_type=bool, summary=f"remove {track} in {region}",
                                        **self._q(req, region))
        self.phases.note(f"rollback {region}", why)

WORKFLOWS = [Upgrade]
