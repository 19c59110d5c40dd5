"""One upgrade wave (a region): deploy the candidate, canary steps or blue-green switch with
analysis, promote into stable; on failure or abort, roll that region back.

Not a workflow on its own: `workflows.upgrade.Upgrade` runs one `WaveSteps.run` per region and
owns the update handlers, which change the shared `Control`.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl.models import phases
    from drctl.models import search_attributes as sa
    from drctl.models.activity_io import ScaleInput, WaitRolloutInput
    from drctl.models.analysis import AnalysisRequest, TrackRef
    from drctl.models.gitops import GitOpsManaged, changes, note_all
    from drctl.models.upgrade import (
        Outcome,
        PromoteRequest,
        RegionRelease,
        RegionTrackRequest,
        RegionWave,
        Release,
        Strategy,
        TrackDeployRequest,
        TrackWeightsRequest,
        TrackWeightsResult,
        UpgradeRequest,
        UpgradeResult,
        UpgradeStatus,
        WarmupRequest,
    )
    from workflows import calls
    from workflows.common import Phases
    from workflows.operation import cause_of
    from workflows.progressive import Control, Stop

# Marks histories in which a failed rollback step is reported (ROLLBACK_FAILED) instead of ending the run.
ROLLBACK_REPORTS_PATCH = "upgrade-rollback-failed-outcome"


def ended_on(req: UpgradeRequest, waves: list[RegionWave], before: dict[str, Release]) -> list[RegionRelease]:
    """Per region, the release it ends on: promoted waves keep the new one, the rest their old one."""
    outcome = {w.region: w.outcome for w in waves}
    by_region = {w.region: w for w in waves}
    out: list[RegionRelease] = []
    for region in req.regions:
        if region not in before:
            continue  # never read: the upgrade stopped before touching anything
        wave = by_region.get(region)
        if outcome.get(region) is Outcome.SUCCEEDED:
            out.append(RegionRelease(region=region, image=req.release.image, state="upgraded"))
        elif wave is not None and wave.outcome is Outcome.ROLLBACK_FAILED:
            out.append(
                RegionRelease(
                    region=region,
                    image=wave.stable_image or before[region].image,
                    state="rollback-failed",
                    left_behind=list(wave.left_behind),
                )
            )
        else:
            state = "rolled-back" if region in outcome else "not-started"
            out.append(RegionRelease(region=region, image=before[region].image, state=state))  # type: ignore[arg-type]
    return out


class WaveSteps:
    def __init__(self, phases: Phases, ctl: Control, state: UpgradeStatus) -> None:
        self.phases = phases
        self.ctl = ctl
        self.state = state
        # True while a canary or green serves: only then can an operator promote it.
        self.candidate_live = False
        # Stable's release per region, read before anything changed; rollback restores it.
        self.before: dict[str, Release] = {}
        # Regions whose stable Deployment promotion has started to change.
        self.promoting: set[str] = set()
        # Objects drctl changed that Argo CD also tracks, for the result (docs/gitops.md).
        self.gitops_managed: list[GitOpsManaged] = []

    async def run(self, req: UpgradeRequest, region: str, res: UpgradeResult) -> None:
        """One region: deploy the candidate, step or switch with analysis, promote; roll back on failure."""
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
            await self._roll_back(req, region, track, wave)
            raise
        except (ActivityError, ApplicationError) as exc:
            wave.outcome, wave.reason = Outcome.ROLLED_BACK, cause_of(exc)
            res.failed_region = region
            await self._roll_back(req, region, track, wave)
            raise Stop(Outcome.ROLLED_BACK, f"{region}: {wave.reason}") from exc
        wave.outcome, wave.reason = Outcome.SUCCEEDED, f"{req.release.image} stable in {region}"

    async def _weights(self, req: UpgradeRequest, region: str, weights: dict[str, int]) -> None:
        got = await self.ctl.abortable(
            calls.set_track_weights(
                TrackWeightsRequest(region=region, weights=weights),
                queue=req.spec.region(region).queue,
                summary=f"{region} track weights " + " / ".join(f"{k} {v}" for k, v in weights.items()),
            )
        )
        # The HTTPRoute's weights, when Argo CD tracks it (self-heal would reset them mid-step).
        note_all(self.gitops_managed, got.gitops_managed)
        self.phases.note(f"weights {region}", " / ".join(f"{k} {v}" for k, v in weights.items()))

    async def _ready(self, req: UpgradeRequest, region: str, track: str, replicas: int | None = None) -> None:
        name, queue = f"{req.app}-{track}", req.spec.region(region).queue
        if replicas is not None:
            scaled = await self.ctl.abortable(
                calls.scale_deployment(
                    ScaleInput(region=region, replicas=replicas, deployment=name),
                    queue=queue,
                    summary=f"scale {name} to {replicas}",
                )
            )
            # A candidate copy drops the marker, so this records only what Git also holds (an HPA on it).
            note_all(self.gitops_managed, scaled.scale_changes())
        await self.ctl.abortable(
            calls.wait_rollout(
                WaitRolloutInput(region=region, timeout_s=req.spec.rollout_timeout_s, deployment=name),
                queue=queue,
                summary=f"wait for {name} in {region}",
            )
        )

    async def _deploy(self, req: UpgradeRequest, region: str, track: str, replicas: int) -> None:
        self.phases.enter(
            f"deploy-{track}", f"`{req.app}-{track}` with `{req.release.image}` ×{replicas} in `{region}`"
        )
        queue = req.spec.region(region).queue
        await self.ctl.abortable(
            calls.deploy_track(
                TrackDeployRequest(region=region, track=track, release=req.release, replicas=replicas),
                queue=queue,
                summary=f"deploy {track} in {region}",
            )
        )
        await self._ready(req, region, track)
        self.phases.enter("warm-up", f"{req.warmup_prompts} prompts per {track} replica in `{region}`")
        warm = await self.ctl.abortable(
            calls.warm_up(
                WarmupRequest(region=region, track=track, prompts=req.warmup_prompts),
                queue=queue,
                summary=f"warm up {track} in {region}",
            )
        )
        self.phases.note(
            f"warm-up {region}", f"{warm.ok} ok / {warm.failed} failed on {warm.replicas} replicas"
        )

    def _analysis(self, req: UpgradeRequest, region: str, track: str) -> AnalysisRequest:
        return AnalysisRequest(
            candidate=TrackRef(region=region, track=track),
            baseline=TrackRef(region=region, track="stable"),
            window_s=req.step_pause_s,
            limits=req.limits,
        )

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
            self.phases.enter(
                f"step-{pct}", f"`{region}`: canary {pct} %, analysing for {req.step_pause_s:g}s"
            )
            await self._weights(req, region, {"stable": 100 - pct, "canary": pct})
            wave.step_percent = self.state.step_percent = pct
            if (
                await self.ctl.analyse(
                    self._analysis(req, region, "canary"),
                    req.spec.region(region).queue,
                    req.max_inconclusive,
                    wave.analyses,
                )
                is None
            ):
                break
        await self._promote(req, region, "canary")

    async def _blue_green(self, req: UpgradeRequest, region: str, wave: RegionWave) -> None:
        await self._deploy(req, region, "green", req.spec.region(region).replicas)
        self.phases.enter("preview", f"`{region}`: green in preview, compared with blue (stable)")
        self.candidate_live = True
        queue = req.spec.region(region).queue
        await self.ctl.analyse(
            self._analysis(req, region, "green"), queue, req.max_inconclusive, wave.analyses
        )
        self.ctl.check_abort()
        self.phases.enter(
            "switch", f"`{region}`: all traffic to green; blue kept {req.scale_down_delay_s:g}s"
        )
        await self._weights(req, region, {"stable": 0, "green": 100})
        wave.step_percent = self.state.step_percent = 100
        # Blue keeps running through the delay, so an abort or a failed check flips back at once.
        try:
            await workflow.wait_condition(
                lambda: self.ctl.abort_reason is not None or self.ctl.promote_requested,
                timeout=timedelta(seconds=req.scale_down_delay_s),
            )
        except TimeoutError:
            pass
        self.ctl.check_abort()
        await self._promote(req, region, "green")

    async def _promote(self, req: UpgradeRequest, region: str, track: str) -> None:
        """Stable takes the new image by a rolling update, then carries all traffic again."""
        self.ctl.check_abort()
        self.phases.enter(
            "promote", f"`{region}`: stable rolls to `{req.release.image}`, then {track} is removed"
        )
        # From here on stable may run the new release: a rollback must put the old one back.
        self.promoting.add(region)
        queue = req.spec.region(region).queue
        promoted = await self.ctl.abortable(
            calls.set_stable_release(
                PromoteRequest(region=region, release=req.release),
                queue=queue,
                summary=f"stable to {req.release.image} in {region}",
            )
        )
        # Argo CD's self-heal puts the Git image back unless the Application ignores it.
        self._note_release(region, f"{req.app}-stable", promoted)
        await self._ready(req, region, "stable")
        self.candidate_live = False
        await self._weights(req, region, {"stable": 100, track: 0})
        await calls.remove_track(
            RegionTrackRequest(region=region, track=track), queue=queue, summary=f"remove {track} in {region}"
        )

    async def _roll_back(self, req: UpgradeRequest, region: str, track: str, wave: RegionWave) -> None:
        """Roll the region back; if any step failed, the wave ends ROLLBACK_FAILED, never "rolled back"."""
        left = await self._rollback(req, region, track, wave.reason)
        if not left:
            return
        wave.outcome, wave.left_behind = Outcome.ROLLBACK_FAILED, left
        if region in self.promoting and any(line.startswith("stable") for line in left):
            wave.stable_image = req.release.image
        wave.reason = f"{wave.reason}; rollback failed, left behind: {'; '.join(left)}"
        self.phases.note(f"rollback {region}", f"FAILED: {'; '.join(left)}")
        raise Stop(Outcome.ROLLBACK_FAILED, f"{region}: {wave.reason}")

    def _note_release(self, region: str, name: str, release: Release) -> None:
        """Record a rollout of stable to `release` (set_stable_release returns it with stable's marker)."""
        note_all(
            self.gitops_managed, changes(region, "Deployment", name, release.fields_written, release.gitops)
        )

    async def _noted_release(self, region: str, name: str, step: Awaitable[Release]) -> None:
        self._note_release(region, name, await step)

    async def _noted_weights(self, step: Awaitable[TrackWeightsResult]) -> None:
        note_all(self.gitops_managed, (await step).gitops_managed)

    async def _undo(self, left: list[str], what: str, step: Awaitable[Any]) -> bool:
        """Run one rollback step; on failure, note what it leaves behind and go on with the rest.

        A failed step must not hide the others' results: the operator needs the full list.
        """
        try:
            await step
            return True
        except (ActivityError, ApplicationError) as exc:
            # Histories from before this change stopped at the first failed rollback step.
            if not workflow.patched(ROLLBACK_REPORTS_PATCH):
                raise
            left.append(f"{what} ({cause_of(exc)})")
            return False

    async def _rollback(self, req: UpgradeRequest, region: str, track: str, why: str) -> list[str]:
        """Weights to stable first (users first), then stable's old image if it moved, then the candidate.

        Returns what could not be undone, one line per failed step; empty when the rollback succeeded.
        """
        self.phases.enter(phases.PHASE_COMPENSATE, f"rolling `{region}` back: {why}")
        self.candidate_live = False
        left: list[str] = []
        candidate, queue = f"{req.app}-{track}", req.spec.region(region).queue
        shifted = await self._undo(
            left,
            f"traffic still reaches {candidate} ({req.release.image})",
            self._noted_weights(
                calls.set_track_weights(
                    TrackWeightsRequest(region=region, weights={"stable": 100, track: 0}),
                    queue=queue,
                    summary=f"{region}: all traffic back to stable",
                )
            ),
        )
        old = self.before.get(region)
        if old is not None and region in self.promoting:
            await self._undo(
                left,
                f"stable {req.app}-stable may still run {req.release.image}, not {old.image}",
                self._noted_release(
                    region,
                    f"{req.app}-stable",
                    calls.set_stable_release(
                        PromoteRequest(region=region, release=old),
                        queue=queue,
                        summary=f"stable back to {old.image}",
                    ),
                ),
            )
        if not shifted:
            # Removing a candidate that still takes traffic would turn a failed rollback into an outage.
            left.append(f"{candidate} ({req.release.image}) kept: it may still serve traffic")
        else:
            await self._undo(
                left,
                f"{candidate} ({req.release.image}) still deployed",
                calls.remove_track(
                    RegionTrackRequest(region=region, track=track),
                    queue=queue,
                    summary=f"remove {track} in {region}",
                ),
            )
        if not left:
            self.phases.note(f"rollback {region}", why)
        return left
