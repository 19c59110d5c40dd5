"""The drill's verdict: judge the experiment, observe the failover and failback it caused, store
the report. `workflows.drill.ChaosDrill` calls these once the experiment has run."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from drctl.models.drill import (
        DrillInput,
        DrillReport,
        ExperimentOutcome,
        Observation,
        ObserveInput,
        Verdict,
        load_figures,
    )
    from workflows import calls
    from workflows.common import Phases
    from workflows.operation import cause_of
    from workflows.slo import PHASE as SLO_PHASE


# Before this patch a drill passed on traffic served elsewhere; with it, the objective must be restored too.
SLO_PATCH = "drill-judges-slo-restored"


async def store_report(report: DrillReport, give_up_after: timedelta = calls.REPORT_UPLOAD_WINDOW) -> None:
    """Upload the report, retrying through an S3 outage. If S3 stays down, the report is not lost:
    it is the workflow's result, and its reasons say that the upload failed and why."""
    try:
        await calls.drill_store_report(
            report, give_up_after=give_up_after, summary="store the drill report in S3"
        )
    except ActivityError as exc:
        # A schedule-to-close timeout wraps the last S3 error: name both.
        why, last = cause_of(exc), exc.cause
        while last is not None and getattr(last, "cause", None) is not None:
            last = getattr(last, "cause")  # noqa: B009 - `cause` exists only on Temporal's failures
        if last is not None and str(last) not in why:
            why = f"{why}; last error: {last}"
        report.reasons.append(f"report not stored in S3 (it is in this workflow's result): {why}")


def _secs(a: datetime | None, b: datetime | None) -> float | None:
    return round((b - a).total_seconds(), 3) if a and b else None


async def _observe(inp: ObserveInput) -> Observation:
    return await calls.drill_observe(inp, summary=f"observe {inp.workflow_id}")


async def judge(phases: Phases, inp: DrillInput, out: ExperimentOutcome, report: DrillReport) -> None:
    """The verdict from the experiment's journal and load, and from the failover and failback it caused."""
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
        phases.enter("observe", "checking that no failover started")
        fo = await _observe(ObserveInput(workflow_id=failover_id, since=out.started_at, timeout_s=0))
        if fo.found:
            report.failover = fo
            report.reasons.append(
                f"a failover ran ({fo.workflow_id} {fo.status}) though this fault must not cause one"
            )
    else:
        await _observe_failover(phases, inp, out, report, failover_id)
    report.verdict = Verdict.PASS if not report.reasons else Verdict.FAILED


def _judge_slo(result: dict[str, Any], report: DrillReport) -> None:
    """Served elsewhere is not enough: the target must meet the objective within the RTO target.

    Anything but a measured "restored in time" fails the drill, with the failover's own line on it,
    which names the metric (e.g. "SLO not restored within 30s: ttft_p99 412 ms > 200 ms at 39.0s").
    """
    report.slo_restored_s = result.get("slo_restored_s")
    report.slo_evidence = result.get("slo_evidence")
    if result.get("slo_met") is not True:
        report.reasons.append(f"SLO {report.slo_evidence or 'not measured: the failover reported no figure'}")


async def _observe_failover(
    phases: Phases, inp: DrillInput, out: ExperimentOutcome, report: DrillReport, wid: str
) -> None:
    spec, plan = inp.spec, inp.plan
    phases.enter("observe-failover", f"waiting for `{wid}`")
    budget = inp.rto_target_s + spec.verify_timeout_s + 30
    fo = await _observe(ObserveInput(workflow_id=wid, since=out.started_at, timeout_s=budget))
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
        report.reasons.append(
            f"failover {fo.status} {result.get('status') or ''}: {result.get('error') or fo.error or ''}".strip()
        )
        return
    # Its wait for "SLO restored" (held for the objective's window) is judged below, by when the
    # objective was restored, not by when the watch ended.
    watching = sum(p.get("duration_s") or 0.0 for p in report.failover_phases if p.get("phase") == SLO_PHASE)
    done_s = (report.failover_done_after_s or 0.0) - watching
    if done_s > inp.rto_target_s:
        report.reasons.append(
            f"failover finished {done_s:.1f}s after the fault, over the {inp.rto_target_s:g}s RTO target"
        )
    if workflow.patched(SLO_PATCH):
        _judge_slo(result, report)
    if report.measured_rto_s is None:
        report.reasons.append("the load never saw traffic fully served elsewhere after the fault")
    elif report.measured_rto_s > inp.rto_target_s:
        report.reasons.append(
            f"measured RTO {report.measured_rto_s:.1f}s is over the {inp.rto_target_s:g}s target"
        )
    phases.enter("failback", f"waiting for `failback/{spec.fleet}` (starting it if nobody does)")
    fb = await _observe(
        ObserveInput(
            workflow_id=f"failback/{spec.fleet}",
            since=fo.closed_at or out.started_at,
            timeout_s=inp.failback_timeout_s,
            start_if_missing=True,
            spec=spec,
            region=plan.target_region,
        )
    )
    report.failback = fb
    if not fb.found or fb.status != "COMPLETED" or fb.result.get("status") not in ("succeeded", "not_needed"):
        why = fb.result.get("error") or fb.error or fb.status or "never started"
        report.reasons.append(f"failback did not succeed: {fb.result.get('status') or ''} {why}".strip())
