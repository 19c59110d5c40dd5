"""ChaosDrill (`drill/<fleet>/<ts>`): prove the failover meets its RTO by really breaking a region.

claim → preflight (fleet healthy, monitor watching, weights as configured) → experiment under load
→ observe the monitor's failover → fail back → verdict → report (S3 and the result).

A drill never blocks a failover or failback (they are what it measures), and it never injects
twice: the experiment activity has no retries.

However the experiment ends (completed, interrupted, killed, timed out), the workflow then clears
every fault in the target itself and reads the region back; a fault still held fails the drill,
named in its reasons, and notifies.

Stopping a drill: `drctl ops abort drill/...` (the `abort` update, with a reason) or a Temporal
workflow cancel. Either one cancels the experiment activity, which interrupts `chaos run` so its
rollbacks play, and returns the interrupted journal; the report is ABORTED with the reason and
says whether the rollbacks ran.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl.models import phases
    from drctl.models import search_attributes as sa
    from drctl.models.activity_io import ProbeRequest
    from drctl.models.drill import (
        OPERATION,
        ClearFaultsInput,
        DrillInput,
        DrillInputInvalid,
        DrillReport,
        ExperimentOutcome,
        ExperimentRunInput,
        MonitorCheckInput,
        Verdict,
        mark_stopped,
    )
    from workflows import calls
    from workflows.drill_judge import judge, store_report
    from workflows.notify import Notifier
    from workflows.operation import Operation, cause_of

# How long the experiment may take beyond its own timeout to play its rollbacks after a cancel.
_ROLLBACK_GRACE_S = 90.0
_PREFLIGHT_ATTEMPTS = 3
# With it, the workflow clears its target after every experiment, not only one whose activity failed.
ALWAYS_CLEARS_PATCH = "drill-always-clears"


# An input outside what the fleet config could produce (a drill started directly through Temporal)
# fails the workflow, with the field and its range, instead of its first task, retried forever.
@workflow.defn(name="ChaosDrill", failure_exception_types=[DrillInputInvalid])
class ChaosDrill(Operation):
    OPERATION, TITLE = OPERATION, "Chaos drill"

    def __init__(self) -> None:
        super().__init__()
        self.experiment_done = False
        self._experiment: workflow.ActivityHandle[ExperimentOutcome] | None = None
        self._experiment_ok = False
        self._cleaned = False  # the workflow's own clear ran (ALWAYS_CLEARS_PATCH)
        self._left: list[str] = []  # what the target still held when read back after that clear

    def on_abort(self) -> str:
        # Cancelling the experiment interrupts `chaos run`, whose rollbacks play before it returns.
        if self._experiment is not None and not self._experiment.done():
            self._experiment.cancel()
            return "stopping the experiment; its rollbacks run before the drill reports ABORTED"
        return f"aborting in phase {self.phases.phase}, before any fault is injected"

    def abort_refused(self) -> str | None:
        if self.abort_reason:
            return "an abort is already under way"
        if self.experiment_done:
            # The fault is already rolled back; what still runs is the failover or failback itself.
            return (
                "the experiment has finished and its rollbacks ran; abort the failover or "
                "failback operation instead"
            )
        return super().abort_refused()

    @workflow.run
    async def run(self, inp: DrillInput) -> DrillReport:
        return await self.conclude(
            self._run(inp),
            lambda rep: (
                None
                if rep.verdict is Verdict.PASS
                else f"drill {rep.verdict.value}: {'; '.join(rep.reasons)}"
            ),
        )

    async def _run(self, inp: DrillInput) -> DrillReport:
        if inp.alternatives:
            # Weekly drills inject a random fault, so the fleet is not tuned to one rehearsed failure.
            inp = inp.model_copy(update={"plan": workflow.random().choice([inp.plan, *inp.alternatives])})
        info, spec, plan = workflow.info(), inp.spec, inp.plan
        self.notes = Notifier(spec)
        # Scheduled runs start without search attributes; set them so `drctl ops` and the UI see it.
        workflow.upsert_search_attributes(
            [
                sa.FLEET.value_set(spec.fleet),
                sa.OPERATION.value_set(OPERATION),
                sa.TARGET_REGION.value_set(plan.target_region),
            ]
        )
        self.phases.title = f"Drill `{plan.name}` on `{spec.fleet}`, target `{plan.target_region}`"
        report = DrillReport(
            id=info.workflow_id,
            fleet=spec.fleet,
            experiment=plan.name,
            title=plan.title,
            target_region=plan.target_region,
            verdict=Verdict.ABORTED,
            started_at=workflow.now(),
            finished_at=workflow.now(),
            expect_failover=plan.expect_failover,
            rto_target_s=inp.rto_target_s,
        )
        try:
            problems = await self._preflight(inp)
            if problems:
                report.reasons = [f"preflight: {p}" for p in problems]
                return await self._finish(report)
            if self.abort_reason:
                report.reasons = [f"aborted before any fault: {self.abort_reason}"]
                return await self._finish(report)
            outcome = await self._experiment_then_clear(inp, report)
            if outcome.cancelled:
                mark_stopped(report, outcome, self.abort_reason or "workflow cancel")
                await self._clear_faults(inp, report, f"abort: {self.abort_reason or 'workflow cancel'}")
                return await self._finish(report)
            await judge(self.phases, inp, outcome, report)
        except asyncio.CancelledError:
            # Cancelled outside the experiment (preflight, observing): nothing of ours is injected.
            report.verdict = Verdict.ABORTED
            report.reasons.append(
                f"cancelled in phase {self.phases.phase}: {self.abort_reason or 'workflow cancel'}"
            )
            if self._experiment is not None:
                await self._clear_faults(inp, report, "cancelled while the experiment ran")
            return await self._finish(report)
        except (ActivityError, ApplicationError) as exc:
            report.verdict = Verdict.ABORTED if not report.fault_injected else Verdict.FAILED
            report.reasons.append(cause_of(exc))
            if self._experiment is not None and not self._experiment_ok:
                # The experiment activity died (its worker was killed, or it timed out): its
                # rollbacks may never have run, so the drill clears the target itself.
                await self._clear_faults(inp, report, f"the experiment did not finish: {cause_of(exc)}")
        return await self._finish(report)

    async def _experiment_then_clear(self, inp: DrillInput, report: DrillReport) -> ExperimentOutcome:
        """The experiment, then the drill's own clear of its target however the experiment ended.

        The experiment's rollbacks are the experiment's to get right (a long pause, a slow probe or a
        SIGTERM at the deadline can keep them from running), so the workflow never relies on them:
        completed, interrupted, killed or timed out, it clears the target and reads it back.
        """
        if not workflow.patched(ALWAYS_CLEARS_PATCH):
            return await self._experiment_run(inp)
        try:
            outcome = await self._experiment_run(inp)
        except asyncio.CancelledError:
            await self._clean_up(inp, report, "cancelled while the experiment ran", say_cleared=True)
            raise
        except (ActivityError, ApplicationError) as exc:
            why = f"the experiment did not finish: {cause_of(exc)}"
            await self._clean_up(inp, report, why, say_cleared=True)
            raise
        how = "interrupted" if outcome.cancelled else str(outcome.journal.get("status") or "ended")
        await self._clean_up(inp, report, f"the experiment ended ({how})", say_cleared=outcome.cancelled)
        return outcome

    async def _clean_up(
        self, inp: DrillInput, report: DrillReport, reason: str, *, say_cleared: bool
    ) -> None:
        """Clear the target and read it back; what is still held fails the drill (see _finish)."""
        self._cleaned = True
        region = inp.plan.target_region
        try:
            res = await calls.drill_clear_faults(
                ClearFaultsInput(region=region, workflow_id=workflow.info().workflow_id, reason=reason),
                summary=f"clear drill faults in {region} and read it back",
            )
        except ActivityError as exc:
            self._left = [f"unknown (the clear failed: {cause_of(exc)})"]
            report.reasons.append(f"faults in {region} NOT cleared after {reason}: {cause_of(exc)}")
            return
        if not res.cleared:
            self._left = res.still_injected or [res.detail or "unknown"]
            report.reasons.append(
                f"clean-up failed: {region} still holds {'; '.join(self._left)} after {reason}"
            )
        elif say_cleared:
            # A completed run says nothing here: a reason would fail a passing drill.
            report.reasons.append(f"drill faults in {region} cleared by the workflow ({reason})")

    async def _clear_faults(self, inp: DrillInput, report: DrillReport, reason: str) -> None:
        if self._cleaned or not workflow.patched("drill-clear-faults"):
            return
        region = inp.plan.target_region
        try:
            res = await calls.drill_clear_faults(
                ClearFaultsInput(region=region, workflow_id=workflow.info().workflow_id, reason=reason),
                summary=f"clear drill faults in {region}",
            )
        except ActivityError as exc:
            report.reasons.append(f"faults in {region} NOT cleared after {reason}: {cause_of(exc)}")
            return
        if res.cleared:
            report.reasons.append(f"drill faults in {region} cleared by the workflow ({reason})")

    async def _preflight(self, inp: DrillInput) -> list[str]:
        spec = inp.spec
        try:
            await self.claim(spec.fleet)
        except (ActivityError, ApplicationError) as exc:
            return [cause_of(exc)]
        self.phases.enter(phases.PHASE_PREFLIGHT, "fleet healthy, monitor watching, weights as configured")
        # One slow probe is a blip, not an unhealthy fleet: only problems that persist over a few
        # probe intervals abort the drill.
        problems: list[str] = []
        for attempt in range(_PREFLIGHT_ATTEMPTS):
            if attempt:
                await workflow.sleep(spec.interval_s)
            problems = await self._health(inp)
            if not problems:
                break
        return problems

    async def _health(self, inp: DrillInput) -> list[str]:
        spec, plan = inp.spec, inp.plan
        problems: list[str] = []
        if plan.target_region not in spec.region_names:
            problems.append(f"target {plan.target_region!r} is not a region of the fleet")
        batch, weights, monitor = await asyncio.gather(
            calls.probe_regions(
                ProbeRequest(regions=spec.region_names),
                probe_timeout_s=spec.probe_timeout_s,
                summary="probe all regions",
            ),
            calls.get_global_weights(),
            calls.drill_monitor_check(MonitorCheckInput(fleet=spec.fleet), summary="ask the monitor"),
        )
        for probe in batch.probes:
            if probe.status.value != "HEALTHY":
                problems.append(f"{probe.region} is {probe.status.value}: {probe.reason}")
        if weights.weights != spec.weights:
            problems.append(f"global weights {weights.weights} differ from the configured {spec.weights}")
        problems += monitor.problems
        if plan.expect_failover and not monitor.running:
            problems.append(
                f"monitor/{spec.fleet} is not running: nothing would detect the fault and fail over"
            )
        if plan.expect_failover and monitor.running and monitor.policy != "automatic":
            problems.append(f"the monitor's policy is {monitor.policy}: the fault would not fail over")
        return problems

    async def _experiment_run(self, inp: DrillInput) -> ExperimentOutcome:
        plan = inp.plan
        self.phases.enter("experiment", f"load through the global endpoint, then `chaos run {plan.name}`")
        # Never retried (a second attempt would inject the fault twice); a cancel waits for its rollbacks.
        self._experiment = calls.start_drill_experiment(
            ExperimentRunInput(
                plan=plan,
                workflow_id=workflow.info().workflow_id,
                load_rps=inp.load_rps,
                timeout_s=inp.timeout_s,
                # The failover judges "SLO restored" under the moved load, after its verification:
                # keep the load up for the objective's window beyond the experiment's end.
                load_tail_s=inp.spec.slo.window_s + 2 if plan.expect_failover else 0.0,
            ),
            grace_s=_ROLLBACK_GRACE_S,
            summary=f"chaos run {plan.name} on {plan.target_region}",
        )
        try:
            # A workflow cancel reaches the activity through this await; the activity answers it
            # with the interrupted run's outcome (cancelled=True) once the rollbacks are done.
            outcome = await self._experiment
            self._experiment_ok = True
            return outcome
        finally:
            self.experiment_done = True

    async def _finish(self, report: DrillReport) -> DrillReport:
        if self._left:
            # Whatever the experiment proved, a fault left behind is a failed drill (and a page).
            report.verdict = Verdict.FAILED
        report.finished_at = workflow.now()
        await self.finish(
            report.verdict.value,
            f"**{report.verdict.value}** " + "; ".join(report.reasons),
            ok=report.verdict is Verdict.PASS,
        )
        report.phases = [t.model_dump(mode="json") for t in self.phases.timings]
        await store_report(report)
        await self.notes.drill_verdict(report)
        return report


WORKFLOWS: list[type] = [ChaosDrill]

__all__ = ["WORKFLOWS", "ChaosDrill", "store_report"]
