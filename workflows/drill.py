"""ChaosDrill (`drill/<fleet>/<ts>`): prove the failover meets its RTO by really breaking a region.

claim → preflight (fleet healthy, monitor watching, weights as configured) → experiment under load
→ observe the monitor's failover → fail back → verdict → report (S3 and the result).

A drill never blocks a failover or failback (they are what it measures), and it never injects
twice: the experiment activity has no retries.

Stopping a drill: `drctl ops abort drill/...` (the `abort` update, with a reason) or a Temporal
workflow cancel. Either one cancels the experiment activity, which interrupts `chaos run` so its
rollbacks play, and returns the interrupted journal; the report is ABORTED with the reason and
says whether the rollbacks ran.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl import search_attributes as sa
    from drctl.models import ops
    from drctl.models.drill import (
        OPERATION,
        ClearFaultsInput,
        ClearFaultsResult,
        DrillInput,
        DrillReport,
        ExperimentOutcome,
        ExperimentRunInput,
        MonitorCheck,
        MonitorCheckInput,
        Observation,
        ObserveInput,
        ReportKey,
        Verdict,
        load_figures,
        mark_stopped,
    )
    from drctl.models.ops import (
        AbortInput,
        OperationProgress,
        ProbeBatch,
        ProbeRequest,
        Weights,
    )
    from drctl.outcome import error_type, failed
    from workflows.common import NO_RETRY, Phases, fast
    from workflows.lock import acquire_fleet, release_fleet
    from workflows.notify import Notifier

_ROLLBACK_GRACE_S = 90.0
_PREFLIGHT_ATTEMPTS = 3


# S3 can be down or throttling (503 SlowDown) for minutes: keep retrying, with backoff, this long.
REPORT_UPLOAD_WINDOW = timedelta(minutes=15)
REPORT_UPLOAD_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                                  maximum_interval=timedelta(seconds=60))


async def store_report(report: DrillReport, give_up_after: timedelta = REPORT_UPLOAD_WINDOW) -> None:
    """Upload the report, retrying through an S3 outage. If S3 stays down, the report is not lost:
    it is the workflow's result, and its reasons say that the upload failed and why."""
    try:
        await workflow.execute_activity(
            "drill_store_report", report, result_type=ReportKey, summary="store the drill report in S3",
            start_to_close_timeout=timedelta(seconds=30), schedule_to_close_timeout=give_up_after,
            retry_policy=REPORT_UPLOAD_RETRY,
        )
    except ActivityError as exc:
        # A schedule-to-close timeout wraps the last S3 error: name both.
        why, last = _cause(exc), exc.cause
        while last is not None and getattr(last, "cause", None) is not None:
            last = getattr(last, "cause")  # noqa: B009 - `cause` exists only on Temporal's failures
        if last is not None and str(last) not in why:
            why = f"{why}; last error: {last}"
        report.reasons.append(f"report not stored in S3 (it is in this workflow's result): {why}")


def _cause(exc: BaseException) -> str:
    cause = exc.cause if isinstance(exc, ActivityError) and exc.cause else exc
    return str(cause)


def _secs(a: datetime | None, b: datetime | None) -> float | None:
    return round((b - a).total_seconds(), 3) if a and b else None


@workflow.defn(name="ChaosDrill")
class ChaosDrill:
    def __init__(self) -> None:
        self.phases = Phases(OPERATION, "Chaos drill")
        self.abort_reason: str | None = None
        self.experiment_done = False
        self._experiment: workflow.ActivityHandle[ExperimentOutcome] | None = None
        self._experiment_ok = False
        self.locked = False
        self.busy = False

    @workflow.query(name=ops.QUERY_PROGRESS)
    def progress(self) -> OperationProgress:
        return self.phases.progress()

    @workflow.update(name=ops.UPDATE_ABORT)
    def abort(self, inp: AbortInput) -> str:
        self.abort_reason = f"{inp.reason} (by {inp.by})"
        if self._experiment is not None and not self._experiment.done():
            self._experiment.cancel()
            return "stopping the experiment; its rollbacks run before the drill reports ABORTED"
        return f"aborting in phase {self.phases.phase}, before any fault is injected"

    @abort.validator
    def _validate_abort(self, inp: AbortInput) -> None:
        if self.abort_reason:
            raise ValueError("an abort is already under way")
        if self.experiment_done:
            # The fault is already rolled back; what still runs is the failover or failback itself.
            raise ValueError("the experiment has finished and its rollbacks ran; abort the failover or "
                             "failback operation instead")

    @workflow.run
    async def run(self, inp: DrillInput) -> DrillReport:
        try:
            report = await self._run(inp)
        finally:
            if self.locked:
                await release_fleet(inp.spec.fleet)
        if report.verdict is not Verdict.PASS:
            # Red in the workflow list; the details carry the whole report.
            raise failed(f"drill {report.verdict.value}: {'; '.join(report.reasons)}", report, busy=self.busy)
        return report

    async def _run(self, inp: DrillInput) -> DrillReport:
        if inp.alternatives:
            # Weekly drills inject a random fault, so the fleet is not tuned to one rehearsed failure.
            inp = inp.model_copy(update={"plan": workflow.random().choice([inp.plan, *inp.alternatives])})
        info, spec, plan = workflow.info(), inp.spec, inp.plan
        self.notes = Notifier(spec)
        # Scheduled runs start without search attributes; set them so `drctl ops` and the UI see it.
        workflow.upsert_search_attributes([
            sa.FLEET.value_set(spec.fleet), sa.OPERATION.value_set(OPERATION),
            sa.TARGET_REGION.value_set(plan.target_region),
        ])
        self.phases.title = f"Drill `{plan.name}` on `{spec.fleet}`, target `{plan.target_region}`"
        report = DrillReport(
            id=info.workflow_id, fleet=spec.fleet, experiment=plan.name, title=plan.title,
            target_region=plan.target_region, verdict=Verdict.ABORTED, started_at=workflow.now(),
            finished_at=workflow.now(), expect_failover=plan.expect_failover, rto_target_s=inp.rto_target_s,
        )
        try:
            problems = await self._preflight(inp)
            if problems:
                report.reasons = [f"preflight: {p}" for p in problems]
                return await self._finish(report)
            if self.abort_reason:
                report.reasons = [f"aborted before any fault: {self.abort_reason}"]
                return await self._finish(report)
            outcome = await self._experiment_run(inp)
            if outcome.cancelled:
                mark_stopped(report, outcome, self.abort_reason or "workflow cancel")
                await self._clear_faults(inp, report, f"abort: {self.abort_reason or 'workflow cancel'}")
                return await self._finish(report)
            await self._judge(inp, outcome, report)
        except asyncio.CancelledError:
            # Cancelled outside the experiment (preflight, observing): nothing of ours is injected.
            report.verdict = Verdict.ABORTED
            report.reasons.append(f"cancelled in phase {self.phases.phase}: {self.abort_reason or 'workflow cancel'}")
            if self._experiment is not None:
                await self._clear_faults(inp, report, "cancelled while the experiment ran")
            return await self._finish(report)
        except (ActivityError, ApplicationError) as exc:
            report.verdict = Verdict.ABORTED if not report.fault_injected else Verdict.FAILED
            report.reasons.append(_cause(exc))
            if self._experiment is not None and not self._experiment_ok:
                # The experiment activity died (its worker was killed, or it timed out): its
                # rollbacks may never have run, so the drill clears the target itself.
                await self._clear_faults(inp, report, f"the experiment did not finish: {_cause(exc)}")
        return await self._finish(report)

    async def _clear_faults(self, inp: DrillInput, report: DrillReport, reason: str) -> None:
        if not workflow.patched("drill-clear-faults"):
            return
        region = inp.plan.target_region
        try:
            res = await workflow.execute_activity(
                "drill_clear_faults", ClearFaultsInput(region=region, workflow_id=workflow.info().workflow_id,
                                                       reason=reason),
                result_type=ClearFaultsResult, summary=f"clear drill faults in {region}",
                start_to_close_timeout=timedelta(seconds=60),
                # Clearing is idempotent, and a fault left behind hurts users: retry for a while.
                retry_policy=RetryPolicy(maximum_attempts=10, initial_interval=timedelta(seconds=1),
                                         maximum_interval=timedelta(seconds=10)),
            )
        except ActivityError as exc:
            report.reasons.append(f"faults in {region} NOT cleared after {reason}: {_cause(exc)}")
            return
        if res.cleared:
            report.reasons.append(f"drill faults in {region} cleared by the workflow ({reason})")

    async def _preflight(self, inp: DrillInput) -> list[str]:
        spec = inp.spec
        self.phases.enter(ops.PHASE_CLAIM, f"taking the lock of fleet {spec.fleet}")
        try:
            await acquire_fleet(spec.fleet, OPERATION)
        except (ActivityError, ApplicationError) as exc:
            self.busy = error_type(exc) == ops.FLEET_BUSY
            return [_cause(exc)]
        self.locked = True
        self.phases.enter(ops.PHASE_PREFLIGHT, "fleet healthy, monitor watching, weights as configured")
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
            workflow.execute_activity("probe_regions", ProbeRequest(regions=spec.region_names), result_type=ProbeBatch,
                                      summary="probe all regions", **fast(spec.probe_timeout_s * 4 + 5)),
            workflow.execute_activity("get_global_weights", result_type=Weights, summary="read global weights", **fast()),
            workflow.execute_activity("drill_monitor_check", MonitorCheckInput(fleet=spec.fleet), result_type=MonitorCheck,
                                      summary="ask the monitor", **fast(20)),
        )
        for probe in batch.probes:
            if probe.status.value != "HEALTHY":
                problems.append(f"{probe.region} is {probe.status.value}: {probe.reason}")
        if weights.weights != spec.weights:
            problems.append(f"global weights {weights.weights} differ from the configured {spec.weights}")
        problems += monitor.problems
        if plan.expect_failover and not monitor.running:
            problems.append(f"monitor/{spec.fleet} is not running: nothing would detect the fault and fail over")
        if plan.expect_failover and monitor.running and monitor.policy != "automatic":
            problems.append(f"the monitor's policy is {monitor.policy}: the fault would not fail over")
        return problems

    async def _experiment_run(self, inp: DrillInput) -> ExperimentOutcome:
        plan = inp.plan
        self.phases.enter("experiment", f"load through the global endpoint, then `chaos run {plan.name}`")
        self._experiment = workflow.start_activity(
            "drill_run_experiment",
            ExperimentRunInput(plan=plan, workflow_id=workflow.info().workflow_id, load_rps=inp.load_rps,
                               timeout_s=inp.timeout_s),
            result_type=ExperimentOutcome, summary=f"chaos run {plan.name} on {plan.target_region}",
            start_to_close_timeout=timedelta(seconds=inp.timeout_s + _ROLLBACK_GRACE_S + 30),
            heartbeat_timeout=timedelta(seconds=20),
            # Never retried: a second attempt would inject the fault a second time.
            retry_policy=NO_RETRY,
            # Wait for the subprocess to finish its rollbacks before the drill moves on.
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        try:
            # A workflow cancel reaches the activity through this await; the activity answers it
            # with the interrupted run's outcome (cancelled=True) once the rollbacks are done.
            outcome = await self._experiment
            self._experiment_ok = True
            return outcome
        finally:
            self.experiment_done = True

    async def _observe(self, inp: ObserveInput, timeout_s: float) -> Observation:
        return await workflow.execute_activity(
            "drill_observe", inp, result_type=Observation, summary=f"observe {inp.workflow_id}",
            start_to_close_timeout=timedelta(seconds=timeout_s + 30), heartbeat_timeout=timedelta(seconds=15),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )

    async def _judge(self, inp: DrillInput, out: ExperimentOutcome, report: DrillReport) -> None:
        spec, plan, v = inp.spec, inp.plan, out.verdict
        report.journal, report.journal_key = v, out.journal_key
        report.fault_injected, report.fault_at = v.fault_injected, v.fault_at
        report.reasons += v.reasons
        figures = load_figures(out.load, v.fault_at, plan.target_region if plan.expect_failover else None)
        report.requests, report.errors, report.served_by = figures.requests, figures.errors, figures.served_by
        report.error_window_s = figures.error_window_s
        if v.fault_at and figures.recovered_at:
            report.measured_rto_s = max(0.0, _secs(v.fault_at, figures.recovered_at) or 0.0)
        if v.aborted:
            report.verdict = Verdict.ABORTED
            return
        if not v.fault_injected:
            report.verdict = Verdict.FAILED
            return
        failover_id = f"failover/{spec.fleet}"
        if not plan.expect_failover:
            self.phases.enter("observe", "checking that no failover started")
            fo = await self._observe(ObserveInput(workflow_id=failover_id, since=out.started_at, timeout_s=0), 0)
            if fo.found:
                report.failover = fo
                report.reasons.append(f"a failover ran ({fo.workflow_id} {fo.status}) though this fault must not cause one")
        else:
            await self._observe_failover(inp, out, report, failover_id)
        report.verdict = Verdict.PASS if not report.reasons else Verdict.FAILED

    async def _observe_failover(self, inp: DrillInput, out: ExperimentOutcome, report: DrillReport, wid: str) -> None:
        spec, plan = inp.spec, inp.plan
        self.phases.enter("observe-failover", f"waiting for `{wid}`")
        budget = inp.rto_target_s + spec.verify_timeout_s + 30
        fo = await self._observe(ObserveInput(workflow_id=wid, since=out.started_at, timeout_s=budget), budget)
        report.failover = fo
        result = fo.result
        report.failover_phases = list(result.get("phases") or [])
        report.failover_rto_s = result.get("rto_s")
        loss = result.get("data_loss") or {}
        report.data_loss_s, report.data_loss_objects = loss.get("lag_s"), loss.get("objects")
        if not fo.found:
            report.reasons.append(f"no failover started within {budget:g}s of the fault")
            return
        report.failover_done_after_s = _secs(report.fault_at, fo.closed_at)
        if fo.status != "COMPLETED" or result.get("status") != "succeeded":
            report.reasons.append(f"failover {fo.status} {result.get('status') or ''}: {result.get('error') or fo.error or ''}".strip())
            return
        if (report.failover_done_after_s or 0) > inp.rto_target_s:
            report.reasons.append(
                f"failover finished {report.failover_done_after_s:.1f}s after the fault, over the {inp.rto_target_s:g}s RTO target")
        if report.measured_rto_s is None:
            report.reasons.append("the load never saw traffic fully served elsewhere after the fault")
        elif report.measured_rto_s > inp.rto_target_s:
            report.reasons.append(f"measured RTO {report.measured_rto_s:.1f}s is over the {inp.rto_target_s:g}s target")
        self.phases.enter("failback", f"waiting for `failback/{spec.fleet}` (starting it if nobody does)")
        fb = await self._observe(
            ObserveInput(workflow_id=f"failback/{spec.fleet}", since=fo.closed_at or out.started_at,
                         timeout_s=inp.failback_timeout_s, start_if_missing=True, spec=spec, region=plan.target_region),
            inp.failback_timeout_s,
        )
        report.failback = fb
        if not fb.found or fb.status != "COMPLETED" or fb.result.get("status") not in ("succeeded", "not_needed"):
            why = fb.result.get("error") or fb.error or fb.status or "never started"
            report.reasons.append(f"failback did not succeed: {fb.result.get('status') or ''} {why}".strip())

    async def _finish(self, report: DrillReport) -> DrillReport:
        report.finished_at = workflow.now()
        self.phases.finish(ops.PHASE_DONE if report.verdict is Verdict.PASS else ops.PHASE_FAILED,
                           f"**{report.verdict.value}** " + "; ".join(report.reasons))
        report.phases = [t.model_dump(mode="json") for t in self.phases.timings]
        workflow.upsert_search_attributes([sa.VERDICT.value_set(report.verdict.value)])
        await store_report(report)
        await self.notes.drill_verdict(report)
        return report


WORKFLOWS: list[type] = [ChaosDrill]

__all__ = ["WORKFLOWS", "ChaosDrill"]
