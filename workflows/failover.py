"""Failover: claim → preflight → (approval) → scale/shift → verify → record RTO; compensate on failure.

Static stability: everything that must happen for the target to take traffic (read/set global
weights, verify, scale the target) runs on the TARGET region's task queue, so the failed region's
worker is never needed. The phases themselves are `workflows.failover_phases.FailoverSteps`.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from drctl.models.failover import (
        MEMO_RELEASED,
        QUERY_RELEASED,
        SIGNAL_SUPERSEDE,
        SIGNAL_VERIFIED,
        FailoverInput,
        FailoverPlan,
        FailoverResult,
        FailoverVerified,
        SupersedeNotice,
    )
    from workflows import global_weights
    from workflows import slo as slo_watch
    from workflows.approval import ApprovalReminder
    from workflows.failover_phases import COMPENSATION_FAILED_PATCH, FailoverSteps
    from workflows.notify import Notifier
    from workflows.operation import Aborted, Operation, cause_of, no_worker
    from workflows.rpo import PATCH as RPO_PATCH
    from workflows.rpo import rpo_preflight
    from workflows.telemetry import record_outcome

__all__ = ["COMPENSATION_FAILED_PATCH", "WORKFLOWS", "Failover"]

# Done for the fleet at verification: the lock is given back and the parent monitor told before the
# objective watch, which a newer failover may end early (`supersede`). Histories from before replay
# with the lock held to the end.
RELEASE_PATCH = "failover-release-at-verify"


@workflow.defn(name="Failover")
class Failover(Operation):
    OPERATION, TITLE = "failover", "Failover"
    FOUR_EYES = True

    @workflow.init
    def __init__(self, inp: FailoverInput) -> None:
        super().__init__()
        self.steps = FailoverSteps(self)
        self.notes = Notifier(inp.spec)
        # Known from the first activation, so an early `approve` is judged against the real gate.
        self.require_approval = (
            inp.require_approval if inp.require_approval is not None else inp.spec.require_approval
        )
        self.superseded: SupersedeNotice | None = None
        self.done_for_fleet = False

    @workflow.query(name=QUERY_RELEASED)
    def released(self) -> bool:
        """Whether this failover is done for the fleet (traffic verified, lock given back)."""
        return self.done_for_fleet

    @workflow.signal(name=SIGNAL_SUPERSEDE)
    def supersede(self, notice: SupersedeNotice) -> None:
        # Honoured once traffic is verified: before that this failover still owns the fleet.
        if self.superseded is None:
            self.superseded = notice

    # --- handlers (progress, approve and abort: Operation) -------------------------------------------------

    def approve_refused(self) -> str | None:
        if not self.require_approval:
            return "this failover has no approval gate"
        # Known before the gate opens, so an approval may arrive early (and is kept).
        if self.approved_by or self.abort_reason or self.finished:
            return f"nothing to approve: phase {self.phases.phase}"
        return None

    def abort_refused(self) -> str | None:
        if not self.finished and self.steps.shifted:
            # After the shift an abort would leave traffic half-way; `drctl failback` undoes it.
            return "traffic has already shifted; run `drctl failback` to move it back"
        return super().abort_refused()

    async def _approval_gate(self, inp: FailoverInput) -> None:
        if not self.require_approval:
            return
        reminder = ApprovalReminder(self.notes, f"failover to {inp.target}", inp.spec.approval_reminder_s)
        await self.await_approval(
            "waiting for `drctl ops approve` by another identity (or reject, or abort)",
            inp.spec.approval_timeout_s,
            reminder,
        )

    # --- run --------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: FailoverInput) -> FailoverResult:
        self.notes.failover_started(inp, self.initiator())

        async def told(res: FailoverResult) -> None:
            await self.notes.failover_ended(res)
            await record_outcome("failover", inp.spec.fleet, res.status, res.rto_s, inp.spec.rto_target_s)

        return await self.conclude(
            self._run(inp),
            lambda res: (
                None if res.status == "succeeded" else f"failover to {res.target} {res.status}: {res.error}"
            ),
            told,
        )

    async def _run(self, inp: FailoverInput) -> FailoverResult:
        spec = inp.spec
        started = workflow.now()
        res = FailoverResult(
            status="failed",
            source=inp.source,
            target=inp.target,
            started_at=started,
            fault_at=inp.fault_at or started,
            rto_target_s=spec.rto_target_s,
        )
        mode = "emergency" if inp.emergency else "normal"
        spread = inp.spread_over()
        onto = ", ".join(f"`{r}`" for r in spread) if len(spread) > 1 else f"`{inp.target}`"
        self.phases.title = f"Failover of fleet `{spec.fleet}` to {onto} ({mode})"
        tq = spec.region(inp.target).queue
        steps = self.steps
        try:
            grant = await self.claim(spec.fleet)
            # DR first: maintenance holding the fleet was told to yield; the failover goes on at once.
            res.preempted = [h.workflow_id for h in grant.preempted]
            if res.preempted:
                self.phases.note("preempted", ", ".join(res.preempted))
            # Abortable: a preflight waiting on a slow or dead region must not outlive `drctl ops abort`.
            plan = await self.abortable(steps.preflight(inp, tq))
            if workflow.patched(RPO_PATCH):
                res.data_loss = await rpo_preflight(self.phases, inp, plan, tq)
            res.plan, res.source, res.weights_before = plan, plan.source, plan.weights_before
            if plan.problems:
                res.status, res.error = "refused", "; ".join(plan.problems)
                return await self._end(res, False, f"refused: {res.error}")
            await self._approval_gate(inp)
            if res.approved_by is None:
                res.approved_by = self.approved_by
            if not inp.emergency:
                res.target_replicas = await steps.scale(inp, plan, tq, res)
                res.gitops_managed = list(steps.gitops_managed)
            self.check_abort()
            await steps.shift(inp, plan, tq, res)
            return await self._after_shift(inp, plan, tq, res)
        except Aborted:
            res.status, res.error = "aborted", self.abort_reason
            res.rejected_by = self.rejected_by
            return await self._end(res, False, f"aborted: {self.abort_reason}")
        except (ActivityError, ApplicationError) as exc:
            res.error = no_worker(exc, tq) or cause_of(exc)
            if self.busy:
                res.status = "refused"
            if steps.shifted:
                if res.changes:
                    await global_weights.settle_wait(
                        steps.propagation, res.changes[0], "the failover compensated"
                    )
                    res.propagated_at = res.changes[0].propagated_at
                await steps.compensate(inp, res, tq)
            return await self._end(res, False, f"{res.status}: {res.error}")

    async def _after_shift(
        self, inp: FailoverInput, plan: FailoverPlan, tq: str, res: FailoverResult
    ) -> FailoverResult:
        """Verify, measure the RTO, scale an emergency's receivers, record the propagation, "SLO restored"."""
        spec = inp.spec
        steps = self.steps
        res.verify = await steps.verify(inp, plan, tq)
        res.changes += steps.reasserted
        unverified = ""
        if res.verify.unattributed:
            # Served, but nothing proves by whom: no RTO is claimed, and the result says why.
            unverified = (
                f"{res.verify.unattributed}/{res.verify.ok} answers carried no "
                f"`{res.verify.region_header}` header, so the serving region is unknown; "
                "make the regional gateways set it (see traffic.region_header)"
            )
            self.phases.note("verify", f"unverified: {res.verify.unattributed} unattributed")
        else:
            res.verified_at = workflow.now()
            res.rto_s = round((res.verified_at - res.fault_at).total_seconds(), 3)
            if inp.last_good_at:
                res.rto_upper_bound_s = round((res.verified_at - inp.last_good_at).total_seconds(), 3)
            res.rto_met = res.rto_s <= spec.rto_target_s
            self.phases.note("measured RTO", f"{res.rto_s} s (target {spec.rto_target_s:g} s)")
        if workflow.patched(RELEASE_PATCH):
            await self._done_for_fleet(inp, res)
        objective = None
        if res.rto_s is not None and workflow.patched(slo_watch.PATCH):
            # Served elsewhere is not yet done for users: the target must meet the objective too,
            # read from now on, while an emergency's target scales and the change propagates.
            objective = slo_watch.SloWatch(spec, inp.target, res.fault_at, tq)
        if inp.emergency:
            try:
                res.target_replicas = await steps.scale(inp, plan, tq, res)
                res.gitops_managed = list(steps.gitops_managed)
            except (ActivityError, ApplicationError) as exc:
                # Traffic is already served by the target; a lagging scale-up is reported, not undone.
                res.error = f"traffic shifted but scaling the target failed: {cause_of(exc)}"
        steps.note_shortfall(plan)
        await steps.await_propagation(res)
        if res.verified_at is not None and spec.global_ttl_s > 0:
            # DNS: resolvers that cached the old answer keep it up to the TTL after the change is in
            # effect everywhere; that, not the first resolver, is when every client has moved.
            everywhere = max(res.verified_at, res.propagated_at or res.verified_at)
            res.rto_clients_bound_s = round(
                (everywhere - res.fault_at).total_seconds() + spec.global_ttl_s, 3
            )
            self.phases.note(
                "clients converged by", f"{res.rto_clients_bound_s} s (+ TTL {spec.global_ttl_s:g} s)"
            )
        if objective is not None and not await self._superseded(objective, res):
            watch, res.slo_evidence = await objective.result(self.phases)
            if watch is not None:
                res.slo_met, res.slo_restored_s = watch.met, watch.restored_s
        if unverified:
            res.status, res.error = "unverified", "; ".join(e for e in (unverified, res.error) if e)
            return await self._end(res, True, f"traffic shifted to `{inp.target}`, unverified: {res.error}")
        res.status = "succeeded"
        slo = "" if res.slo_evidence is None else f"; SLO {res.slo_evidence}"
        return await self._end(res, True, f"traffic on `{inp.target}`; RTO {res.rto_s} s{slo}")

    async def _done_for_fleet(self, inp: FailoverInput, res: FailoverResult) -> None:
        """Traffic is on the target: give the fleet's lock back and tell the monitor that started us, so
        a region failing next is answered at once, not after the objective watch."""
        res.released_at = workflow.now()
        await self.release()
        self.done_for_fleet = True
        # In the memo too: a new failover's client reads it with `describe`, which needs no worker.
        workflow.upsert_memo({MEMO_RELEASED: True})
        self.phases.note("done for the fleet", f"traffic on `{inp.target}`; the fleet's lock is given back")
        parent = workflow.info().parent
        if parent is None:
            return
        info = workflow.info()
        note = FailoverVerified(
            workflow_id=info.workflow_id,
            run_id=info.run_id,
            source=res.source or "",
            target=inp.target,
            rto_s=res.rto_s,
            weights_after=res.weights_after,
        )
        try:
            await workflow.get_external_workflow_handle(parent.workflow_id, run_id=parent.run_id).signal(
                SIGNAL_VERIFIED, note
            )
        except FailureError as exc:
            # A monitor stopped meanwhile learns the outcome from our result, as before.
            workflow.logger.info("could not tell %s the failover is verified: %s", parent.workflow_id, exc)

    async def _superseded(self, objective: slo_watch.SloWatch, res: FailoverResult) -> bool:
        """Wait for the objective watch unless a newer operation supersedes it; True when one did."""
        if not workflow.patched(RELEASE_PATCH):
            return False
        await workflow.wait_condition(lambda: objective.task.done() or self.superseded is not None)
        if objective.task.done() or self.superseded is None:
            return False
        objective.task.cancel()
        by = self.superseded.by
        res.superseded_by = by
        res.slo_evidence = f"not judged: superseded by {by}" + (
            f" ({self.superseded.reason})" if self.superseded.reason else ""
        )
        self.phases.note("superseded", res.slo_evidence)
        return True

    async def _end(self, res: FailoverResult, ok: bool, details: str) -> FailoverResult:
        res.phases = self.phases.timings
        await self.finish(
            res.status,
            details,
            ok=ok,
            memo={"status": res.status, "rto_s": res.rto_s, "compensated": res.compensated},
        )
        res.phases = list(self.phases.timings)
        return res


WORKFLOWS = [Failover]
