"""Failover: claim → preflight → (approval) → scale/shift → verify → record RTO; compensate on failure.

Static stability: everything that must happen for the target to take traffic (read/set global
weights, verify, scale the target) runs on the TARGET region's task queue, so the failed region's
worker is never needed.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

with workflow.unsafe.imports_passed_through():
    from drctl import search_attributes as sa
    from drctl.models import ops
    from drctl.models.failover import (
        FailoverInput,
        FailoverPlan,
        FailoverResult,
        plan_failover,
        target_problem,
    )
    from drctl.models.health import ProbeStatus, RegionProbe
    from drctl.models.ops import (
        AbortInput,
        ApproveInput,
        Capacity,
        DeploymentStatus,
        OperationProgress,
        RegionRequest,
        ScaleInput,
        VerifyInput,
        VerifyResult,
        WaitRolloutInput,
        Weights,
    )
    from drctl.outcome import error_type, failed
    from workflows import global_weights
    from workflows.common import Phases, fast, fmt_weights, no_worker, region_bound
    from workflows.lock import acquire_fleet, release_fleet
    from workflows.notify import Notifier
    from workflows.rpo import PATCH as RPO_PATCH
    from workflows.rpo import rpo_preflight
    from workflows.telemetry import record_outcome

# Verify attempts are repeated by the workflow; this only replaces an attempt that was lost.
_VERIFY_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=500), backoff_coefficient=1.0,
                            non_retryable_error_types=["AuthConfigError"])


class Aborted(Exception):
    pass


def _reason(exc: BaseException) -> str:
    """The innermost message: ActivityError wraps the ApplicationError the activity raised."""
    while isinstance(exc, (ActivityError, ChildWorkflowError)) and exc.cause is not None:
        exc = exc.cause
    return str(exc)


@workflow.defn(name="Failover")
class Failover:
    @workflow.init
    def __init__(self, inp: FailoverInput) -> None:
        self.phases = Phases("failover", "Failover")
        self.approved_by: str | None = None
        self.abort_reason: str | None = None
        self.shifted = False
        self.finished = False
        self.locked = False
        self.busy = False
        # The background wait for the shift to be INSYNC (Route 53); None on a synchronous tier.
        self._propagation: asyncio.Task[Any] | None = None
        self.notes = Notifier(inp.spec)
        # Known from the first activation, so an early `approve` is judged against the real gate.
        self.require_approval = inp.require_approval if inp.require_approval is not None else inp.spec.require_approval

    # --- handlers ---------------------------------------------------------------------------------

    @workflow.query(name=ops.QUERY_PROGRESS)
    def progress(self) -> OperationProgress:
        return self.phases.progress()

    @workflow.update(name=ops.UPDATE_APPROVE)
    def approve(self, inp: ApproveInput) -> str:
        self.approved_by = inp.approver
        return f"approved by {inp.approver}"

    @approve.validator
    def _validate_approve(self, inp: ApproveInput) -> None:
        if not self.require_approval:
            raise ValueError("this failover has no approval gate")
        if self.approved_by or self.abort_reason or self.finished:
            raise ValueError(f"nothing to approve: phase {self.phases.phase}")

    @workflow.update(name=ops.UPDATE_ABORT)
    def abort(self, inp: AbortInput) -> str:
        self.abort_reason = f"{inp.reason} (by {inp.by})"
        return f"abort requested in phase {self.phases.phase}"

    @abort.validator
    def _validate_abort(self, inp: AbortInput) -> None:
        if self.finished:
            raise ValueError("the failover has already finished")
        if self.shifted:
            # After the shift an abort would leave traffic half-way; `drctl failback` undoes it.
            raise ValueError("traffic has already shifted; run `drctl failback` to move it back")

    # --- run --------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: FailoverInput) -> FailoverResult:
        self.notes.failover_started(inp)
        try:
            res = await self._run(inp)
        finally:
            if self.locked:
                await release_fleet(inp.spec.fleet)
        await self.notes.failover_ended(res)
        await record_outcome("failover", inp.spec.fleet, res.status, res.rto_s, inp.spec.rto_target_s)
        await workflow.wait_condition(workflow.all_handlers_finished)
        if res.status != "succeeded":
            # Failed in the workflow list, red; the details carry the whole result for every reader.
            raise failed(f"failover to {res.target} {res.status}: {res.error}", res, busy=self.busy)
        return res

    async def _run(self, inp: FailoverInput) -> FailoverResult:
        spec = inp.spec
        started = workflow.now()
        res = FailoverResult(
            status="failed", source=inp.source, target=inp.target, started_at=started,
            fault_at=inp.fault_at or started, rto_target_s=spec.rto_target_s,
        )
        mode = "emergency" if inp.emergency else "normal"
        self.phases.title = f"Failover of fleet `{spec.fleet}` to `{inp.target}` ({mode})"
        tq = spec.region(inp.target).queue
        try:
            self.phases.enter(ops.PHASE_CLAIM, f"taking the lock of fleet {spec.fleet}")
            grant = await acquire_fleet(spec.fleet, "failover")
            self.locked = True
            # DR first: maintenance holding the fleet was told to yield; the failover goes on at once.
            res.preempted = [h.workflow_id for h in grant.preempted]
            if res.preempted:
                self.phases.note("preempted", ", ".join(res.preempted))
            # Abortable: a preflight waiting on a slow or dead region must not outlive `drctl ops abort`.
            plan = await self._abortable(self._preflight(inp, tq))
            if workflow.patched(RPO_PATCH):
                res.data_loss = await rpo_preflight(self.phases, inp, plan, tq)
            res.plan, res.source, res.weights_before = plan, plan.source, plan.weights_before
            if plan.problems:
                res.status, res.error = "refused", "; ".join(plan.problems)
                return self._end(res, ops.PHASE_FAILED, f"refused: {res.error}")
            await self._approval_gate(inp)
            if res.approved_by is None:
                res.approved_by = self.approved_by
            if not inp.emergency:
                res.target_replicas = await self._scale(inp, plan, tq)
            self._check_abort()
            await self._shift(inp, plan, tq, res)
            res.verify = await self._verify(inp, plan, tq)
            unverified = ""
            if res.verify.unattributed:
                # Served, but nothing proves by whom: no RTO is claimed, and the result says why.
                unverified = (f"{res.verify.unattributed}/{res.verify.ok} answers carried no "
                              f"`{res.verify.region_header}` header, so the serving region is unknown; "
                              "make the regional gateways set it (see traffic.region_header)")
                self.phases.note("verify", f"unverified: {res.verify.unattributed} unattributed")
            else:
                res.verified_at = workflow.now()
                res.rto_s = round((res.verified_at - res.fault_at).total_seconds(), 3)
                if inp.last_good_at:
                    res.rto_upper_bound_s = round((res.verified_at - inp.last_good_at).total_seconds(), 3)
                res.rto_met = res.rto_s <= spec.rto_target_s
                self.phases.note("measured RTO", f"{res.rto_s} s (target {spec.rto_target_s:g} s)")
            if inp.emergency:
                try:
                    res.target_replicas = await self._scale(inp, plan, tq)
                except (ActivityError, ApplicationError) as exc:
                    # Traffic is already served by the target; a lagging scale-up is reported, not undone.
                    res.error = f"traffic shifted but scaling the target failed: {_reason(exc)}"
            self._note_shortfall(plan)
            await self._await_propagation(res)
            if unverified:
                res.status, res.error = "unverified", "; ".join(e for e in (unverified, res.error) if e)
                return self._end(res, ops.PHASE_DONE, f"traffic shifted to `{inp.target}`, unverified: {res.error}")
            res.status = "succeeded"
            return self._end(res, ops.PHASE_DONE, f"traffic on `{inp.target}`; RTO {res.rto_s} s")
        except Aborted:
            res.status, res.error = "aborted", self.abort_reason
            return self._end(res, ops.PHASE_FAILED, f"aborted: {self.abort_reason}")
        except (ActivityError, ApplicationError) as exc:
            res.error = no_worker(exc, tq) or _reason(exc)
            if error_type(exc) == ops.FLEET_BUSY:
                res.status, self.busy = "refused", True
            if self.shifted:
                if res.changes:
                    await global_weights.settle_wait(self._propagation, res.changes[0], "the failover compensated")
                    res.propagated_at = res.changes[0].propagated_at
                await self._compensate(inp, res, tq)
            return self._end(res, ops.PHASE_FAILED, f"{res.status}: {res.error}")

    # --- phases -----------------------------------------------------------------------------------

    async def _preflight(self, inp: FailoverInput, tq: str) -> FailoverPlan:
        spec = inp.spec
        self.phases.enter(ops.PHASE_PREFLIGHT, "reading weights, target health and capacity")
        weights = (await workflow.execute_activity(
            "get_global_weights", result_type=Weights, summary="read global weights", task_queue=tq, **fast(),
        )).weights
        probe_task = None
        if not inp.force:
            probe_task = workflow.execute_activity(
                "probe_region", RegionRequest(region=inp.target), result_type=RegionProbe,
                summary=f"probe target {inp.target}", **fast(spec.probe_timeout_s * 4 + 5),
            )
        cap_task = workflow.execute_activity(
            "get_capacity", RegionRequest(region=inp.target), result_type=Capacity,
            summary=f"capacity of {inp.target}", **region_bound(tq, 30),
        )
        probe, cap = await asyncio.gather(probe_task or _none(), cap_task)
        plan = plan_failover(spec, weights, inp.target, inp.source, cap, emergency=inp.emergency, force=inp.force,
                             target_issue=target_problem(probe, inp.emergency, spec.fail_on_degraded))
        workflow.upsert_search_attributes([sa.SOURCE_REGION.value_set(plan.source or ""),
                                           sa.TARGET_REGION.value_set(inp.target)])
        self.phases.note("weights", f"{fmt_weights(weights)} → {fmt_weights(plan.weights_after)}")
        self.phases.note("target replicas", f"{cap.replicas} → {plan.target_replicas_planned} of "
                                            f"{plan.target_replicas_needed} needed (max {cap.max_replicas})")
        return plan

    async def _approval_gate(self, inp: FailoverInput) -> None:
        if not self.require_approval:
            return
        self.phases.awaiting_approval = True
        self.phases.enter(ops.PHASE_AWAITING_APPROVAL, "waiting for `drctl ops approve` (or abort)")
        try:
            await workflow.wait_condition(
                lambda: self.approved_by is not None or self.abort_reason is not None,
                timeout=timedelta(seconds=inp.spec.approval_timeout_s),
            )
        except TimeoutError:
            self.abort_reason = f"no approval within {inp.spec.approval_timeout_s:g} s"
        finally:
            self.phases.awaiting_approval = False
        self._check_abort()
        self.phases.note("approved by", self.approved_by or "")

    async def _scale(self, inp: FailoverInput, plan: FailoverPlan, tq: str) -> int:
        if plan.target_replicas_planned <= plan.target_replicas_before:
            return plan.target_replicas_before
        n = plan.target_replicas_planned
        self.phases.enter(ops.PHASE_SCALE, f"scaling `{inp.target}` to {n} replicas")
        await self._abortable(workflow.execute_activity(
            "scale_deployment", ScaleInput(region=inp.target, replicas=n), result_type=DeploymentStatus,
            summary=f"scale {inp.target} to {n}", **region_bound(tq, 30),
        ))
        timeout = inp.spec.rollout_timeout_s
        # Retried (a rollout wait is idempotent): a worker killed mid-wait is noticed by the heartbeat
        # timeout and the wait resumes on another worker. RolloutTimeout itself is non-retryable.
        opts = region_bound(tq, timeout + 30) | {"heartbeat_timeout": timedelta(seconds=10)}
        st = await self._abortable(workflow.execute_activity(
            "wait_rollout", WaitRolloutInput(region=inp.target, timeout_s=timeout), result_type=DeploymentStatus,
            summary=f"wait for {n} ready replicas in {inp.target}", **opts,
        ))
        return st.replicas

    async def _shift(self, inp: FailoverInput, plan: FailoverPlan, tq: str, res: FailoverResult) -> None:
        self.phases.enter(ops.PHASE_SHIFT, f"global weights {fmt_weights(plan.weights_after)}")
        # Mark before the call: if the worker dies mid-call the weights may already be applied.
        self.shifted = True
        change = await global_weights.apply(tq, plan.weights_after, f"failover to {inp.target}",
                                            f"shift traffic to {inp.target}")
        res.changes.append(change)
        res.weights_after = change.weights
        res.shifted_at = res.weights_applied_at = change.applied_at
        res.propagated_at = change.propagated_at
        # Verification starts now, while the tier propagates: clients follow DNS as it spreads, and
        # the verify deadline already allows for the TTL. The wait only records when it is done.
        self._propagation = global_weights.start_wait(tq, change, inp.spec.global_propagation_timeout_s)
        if self._propagation is not None:
            self.phases.note("propagation", f"change {change.change_id} PENDING since {change.applied_at:%H:%M:%S}")

    async def _await_propagation(self, res: FailoverResult) -> None:
        """Record when the shift was in effect everywhere; a slow propagation is noted, never a failure."""
        if self._propagation is None or not res.changes:
            return
        change = res.changes[0]
        if not self._propagation.done():
            self.phases.enter(ops.PHASE_PROPAGATE, f"verified; waiting for change {change.change_id} to be INSYNC")
        await global_weights.finish_wait(self._propagation, change)
        res.propagated_at = change.propagated_at
        self.phases.note("propagation", change.note or f"{change.propagation} at {change.propagated_at:%H:%M:%S}")

    async def _verify(self, inp: FailoverInput, plan: FailoverPlan, tq: str) -> VerifyResult:
        """Repeat verification until every answer is good and none comes from a source region.

        Returns as soon as that holds with every answer attributed, or with none attributed (no
        gateway sets the region header: waiting cannot change that). A partly attributed batch
        is retried until the deadline, then returned as it is; the caller reports `unverified`.
        """
        spec = inp.spec
        sources = [s for s in (plan.source or "").split(",") if s]
        self.phases.enter(ops.PHASE_VERIFY, f"{spec.verify_requests} requests through the global endpoint")
        # verify_deadline_s = verify_timeout_s + the global tier's TTL: resolvers may serve the old
        # answer that long after the change.
        deadline = workflow.now() + timedelta(seconds=spec.verify_deadline_s)
        last: VerifyResult | None = None
        served = False
        attempt = 0
        while workflow.now() < deadline:
            attempt += 1
            left = max(1.0, (deadline - workflow.now()).total_seconds())
            last = await workflow.execute_activity(
                "verify_global", VerifyInput(requests=spec.verify_requests, timeout_s=min(left, 10.0)),
                result_type=VerifyResult, summary=f"verify attempt {attempt}", task_queue=tq,
                start_to_close_timeout=timedelta(seconds=min(left, 10.0) + 5), heartbeat_timeout=timedelta(seconds=5),
                # A lost attempt (worker restart, timeout) is retried by the server until the deadline
                # rather than ending the failover; a bad token (AuthConfigError) is not retried.
                schedule_to_close_timeout=timedelta(seconds=left + 5), retry_policy=_VERIFY_RETRY,
            )
            served = last.ok == last.total and last.served_by(sources) == 0
            if served and last.unattributed in (0, last.ok):
                self.phases.note("verify", f"{last.ok}/{last.total} ok, by region {last.by_region}"
                                           + (f", {last.unattributed} unattributed" if last.unattributed else ""))
                return last
            await workflow.sleep(0.5)
        if last is not None and served:
            return last
        raise ApplicationError(f"verification failed before {spec.verify_deadline_s:g}s: {last}", type="VerifyFailed")

    async def _compensate(self, inp: FailoverInput, res: FailoverResult, tq: str) -> None:
        self.phases.enter(ops.PHASE_COMPENSATE, "failure after the shift: deciding whether to restore weights")
        sources = [s for s in (res.source or "").split(",") if s]
        dead = []
        for s in sources:
            try:
                p = await workflow.execute_activity("probe_region", RegionRequest(region=s), result_type=RegionProbe,
                                                    summary=f"probe source {s}", **fast(inp.spec.probe_timeout_s * 4 + 5))
                if p.status is ProbeStatus.DOWN:
                    dead.append(s)
            except ActivityError:
                dead.append(s)
        if dead:
            # Moving traffic back to a dead region would turn a partial outage into a full one.
            res.compensated = "left_on_target_source_dead"
            self.phases.note("compensation", f"left on {inp.target}: {', '.join(dead)} is DOWN")
            return
        # Waits for propagation too: the fleet is released only once the restore is in effect (or the
        # wait's deadline says it is still pending), so the next operation does not race it.
        try:
            change = await global_weights.apply_and_wait(tq, res.weights_before, "failover compensation",
                                                         "restore previous weights",
                                                         inp.spec.global_propagation_timeout_s)
        except (ActivityError, ApplicationError) as exc:
            if not workflow.patched(COMPENSATION_FAILED_PATCH):
                raise  # histories from before the patch ended here, failed with the raw activity error
            # The operator must learn that traffic is still on the target, and why it could not move back.
            res.compensated = "compensation_failed"
            res.error = f"{res.error}; compensation failed, weights left at {fmt_weights(res.weights_after or {})}: " \
                        f"{_reason(exc)}"
            self.phases.note("compensation", f"FAILED: {_reason(exc)}")
            return
        res.changes.append(change)
        res.weights_after = change.weights
        res.compensated = "restored_weights"
        self.phases.note("compensation", f"restored {fmt_weights(change.weights)} ({change.propagation})")

    # --- helpers ----------------------------------------------------------------------------------

    def _note_shortfall(self, plan: FailoverPlan) -> None:
        if plan.shortfall:
            # Reported, never a refusal in an emergency: traffic on a short target beats a dead source.
            self.phases.note("capacity shortfall", f"{plan.target} needs {plan.target_replicas_needed} replicas "
                                                   f"({plan.sizing}); max_replicas {plan.max_replicas}")

    def _check_abort(self) -> None:
        if self.abort_reason is not None:
            raise Aborted(self.abort_reason)

    async def _abortable(self, call: Any) -> Any:
        task = asyncio.ensure_future(call)
        await workflow.wait_condition(lambda: task.done() or self.abort_reason is not None)
        if not task.done():
            task.cancel()
            raise Aborted(self.abort_reason)
        return task.result()

    def _end(self, res: FailoverResult, phase: str, details: str) -> FailoverResult:
        res.phases = self.phases.timings
        self.finished = True
        self.phases.finish(phase, details)
        workflow.upsert_search_attributes([sa.VERDICT.value_set(res.status)])
        workflow.upsert_memo({"status": res.status, "rto_s": res.rto_s, "compensated": res.compensated})
        res.phases = list(self.phases.timings)
        return res


# Before this patch a failed compensation escaped the workflow as a raw activity error, without the result.
COMPENSATION_FAILED_PATCH = "failover-compensation-failure-reported"


async def _none() -> None:
    return None


WORKFLOWS = [Failover]
