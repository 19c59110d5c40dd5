"""The Failover's phases: preflight, scale, shift, verify, propagation, compensation.

`workflows.failover.Failover` runs them in order and owns the handlers and the approval gate;
`FailoverSteps` is handed the operation (its phases and abort point), as `WaveSteps` is handed the
upgrade's, and keeps the shift's own state, so each phase reads on its own. Everything that must
happen for the target to take traffic runs on the TARGET region's queue (`tq`), so the failed
region's worker is never needed.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, cast

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

with workflow.unsafe.imports_passed_through():
    from drctl.decision.headroom import place
    from drctl.decision.rules.reconcile import drift
    from drctl.models import phases
    from drctl.models import search_attributes as sa
    from drctl.models.activity_io import (
        Capacity,
        RegionRequest,
        ScaleInput,
        VerifyInput,
        VerifyResult,
        WaitRolloutInput,
    )
    from drctl.models.failover import (
        FailoverInput,
        FailoverPlan,
        FailoverResult,
        plan_failover,
        target_problem,
    )
    from drctl.models.gitops import GitOpsManaged, note_all
    from drctl.models.health import ProbeStatus
    from drctl.models.traffic import GlobalChange
    from workflows import calls, global_weights
    from workflows import failover_receivers as receivers
    from workflows.common import fmt_weights
    from workflows.operation import Operation, cause_of

# Before this patch a failed compensation escaped the workflow as a raw activity error, without the result.
COMPENSATION_FAILED_PATCH = "failover-compensation-failure-reported"
# Before this patch a global tier that lost the shift's weights while verification ran (restarted
# with its config weights, or edited by hand) was only waited out until the verify deadline.
VERIFY_REASSERT_PATCH = "failover-verify-reasserts"
MAX_REASSERTS = 3  # a tier that keeps losing them is not fought for ever: verification then fails
REASSERT_READ_EVERY_S = 2.0  # while verification fails, the weights in effect are read this often


class FailoverSteps:
    """The phases of one failover, on the operation's phases and abort point."""

    def __init__(self, op: Operation) -> None:
        self.op = op
        self.phases = op.phases
        # Set before the shift's call: if the worker dies mid-call the weights may already be applied.
        self.shifted = False
        # The background wait for the shift to be INSYNC (Route 53); None on a synchronous tier.
        self.propagation: asyncio.Task[Any] | None = None
        # Objects drctl changed that Argo CD also tracks, for the result (docs/gitops.md).
        self.gitops_managed: list[GitOpsManaged] = []
        # The weights the shift put in effect, and the changes that put them back during verification.
        self.applied: dict[str, int] | None = None
        self.reasserted: list[GlobalChange] = []

    async def preflight(self, inp: FailoverInput, tq: str) -> FailoverPlan:
        self.phases.enter(phases.PHASE_PREFLIGHT, "reading weights, target health and capacity")
        plan, weights, cap = await plan_preflight(inp, tq)
        workflow.upsert_search_attributes(
            [sa.SOURCE_REGION.value_set(plan.source or ""), sa.TARGET_REGION.value_set(inp.target)]
        )
        self.phases.note("weights", f"{fmt_weights(weights)} → {fmt_weights(plan.weights_after)}")
        self.phases.note(
            "target replicas",
            f"{cap.replicas} → {plan.target_replicas_planned} of "
            f"{plan.target_replicas_needed} needed (max {cap.max_replicas})",
        )
        return plan

    async def scale(self, inp: FailoverInput, plan: FailoverPlan, tq: str, res: FailoverResult) -> int:
        """Scale the target for its share, and in a spread every other receiver whose weight rises,
        side by side (workflows/failover_receivers.py); the target's replicas."""
        others = receivers.to_size(inp, plan.weights_before, plan.weights_after)
        if not others:
            return await self._scale_target(inp, plan, tq)
        grows = plan.target_replicas_planned > plan.target_replicas_before
        target = f"`{inp.target}` to {plan.target_replicas_planned} replicas, " if grows else ""
        self.phases.enter(
            phases.PHASE_SCALE,
            f"scaling {target}{', '.join(f'`{r}`' for r in others)} for their new share",
        )
        replicas, others_done = await asyncio.gather(
            self._scale_target(inp, plan, tq, enter=False),
            receivers.scale_receivers(self.op, inp, plan, res, self.gitops_managed, others),
            return_exceptions=True,
        )
        receivers.raise_first([replicas, others_done])
        return cast(int, replicas)

    async def _scale_target(self, inp: FailoverInput, plan: FailoverPlan, tq: str, enter: bool = True) -> int:
        if plan.target_replicas_planned <= plan.target_replicas_before:
            return plan.target_replicas_before
        n = plan.target_replicas_planned
        if enter:
            self.phases.enter(phases.PHASE_SCALE, f"scaling `{inp.target}` to {n} replicas")
        scaled = await self.op.abortable(
            calls.scale_deployment(
                ScaleInput(region=inp.target, replicas=n), queue=tq, summary=f"scale {inp.target} to {n}"
            )
        )
        # Argo CD's self-heal puts spec.replicas back unless the Application ignores it.
        note_all(self.gitops_managed, scaled.scale_changes())
        st = await self.op.abortable(
            calls.wait_rollout(
                WaitRolloutInput(region=inp.target, timeout_s=inp.spec.rollout_timeout_s),
                queue=tq,
                summary=f"wait for {n} ready replicas in {inp.target}",
            )
        )
        return st.replicas

    async def shift(self, inp: FailoverInput, plan: FailoverPlan, tq: str, res: FailoverResult) -> None:
        self.phases.enter(phases.PHASE_SHIFT, f"global weights {fmt_weights(plan.weights_after)}")
        # Mark before the call: if the worker dies mid-call the weights may already be applied.
        self.shifted = True
        change = await global_weights.apply(
            tq, plan.weights_after, f"failover to {inp.target}", f"shift traffic to {inp.target}"
        )
        res.changes.append(change)
        res.weights_after = self.applied = change.weights
        res.shifted_at = res.weights_applied_at = change.applied_at
        res.propagated_at = change.propagated_at
        # Verification starts now, while the tier propagates: clients follow DNS as it spreads, and
        # the verify deadline already allows for the TTL. The wait only records when it is done.
        self.propagation = global_weights.start_wait(tq, change, inp.spec.global_propagation_timeout_s)
        if self.propagation is not None:
            self.phases.note(
                "propagation", f"change {change.change_id} PENDING since {change.applied_at:%H:%M:%S}"
            )

    async def await_propagation(self, res: FailoverResult) -> None:
        """Record when the shift was in effect everywhere; a slow propagation is noted, never a failure."""
        if self.propagation is None or not res.changes:
            return
        change = res.changes[0]
        if not self.propagation.done():
            self.phases.enter(
                phases.PHASE_PROPAGATE, f"verified; waiting for change {change.change_id} to be INSYNC"
            )
        await global_weights.finish_wait(self.propagation, change)
        res.propagated_at = change.propagated_at
        self.phases.note(
            "propagation", change.note or f"{change.propagation} at {change.propagated_at:%H:%M:%S}"
        )

    async def verify(self, inp: FailoverInput, plan: FailoverPlan, tq: str) -> VerifyResult:
        """Repeat verification until every answer is good and none comes from a source region.

        Returns as soon as that holds with every answer attributed, or with none attributed (no
        gateway sets the region header: waiting cannot change that). A partly attributed batch
        is retried until the deadline, then returned as it is; the caller reports `unverified`.
        """
        spec = inp.spec
        sources = [s for s in (plan.source or "").split(",") if s]
        self.phases.enter(phases.PHASE_VERIFY, f"{spec.verify_requests} requests through the global endpoint")
        # verify_deadline_s = verify_timeout_s + the global tier's TTL: resolvers may serve the old
        # answer that long after the change.
        deadline = workflow.now() + timedelta(seconds=spec.verify_deadline_s)
        last: VerifyResult | None = None
        served = False
        attempt = 0
        read_at = None
        while workflow.now() < deadline:
            attempt += 1
            left = max(1.0, (deadline - workflow.now()).total_seconds())
            # A lost attempt (worker restart, timeout) is retried by the server until the deadline
            # rather than ending the failover.
            last = await calls.verify_global(
                VerifyInput(requests=spec.verify_requests, timeout_s=min(left, 10.0)),
                queue=tq,
                deadline_s=left,
                summary=f"verify attempt {attempt}",
            )
            served = last.ok == last.total and last.served_by(sources) == 0
            if served and last.unattributed in (0, last.ok):
                self.phases.note(
                    "verify",
                    f"{last.ok}/{last.total} ok, by region {last.by_region}"
                    + (f", {last.unattributed} unattributed" if last.unattributed else ""),
                )
                return last
            due = read_at is None or (workflow.now() - read_at).total_seconds() >= REASSERT_READ_EVERY_S
            if not served and due and self.applied is not None and len(self.reasserted) < MAX_REASSERTS:
                if workflow.patched(VERIFY_REASSERT_PATCH):
                    read_at = workflow.now()
                    if await self._reassert(tq):
                        # The re-applied weights need their own propagation window.
                        deadline = max(deadline, workflow.now() + timedelta(seconds=spec.verify_deadline_s))
                        continue
            await workflow.sleep(0.5)
        if last is not None and served:
            return last
        raise ApplicationError(
            f"verification failed before {spec.verify_deadline_s:g}s: {last}", type="VerifyFailed"
        )

    async def _reassert(self, tq: str) -> bool:
        """Verification failed: the weights in effect, read; when they are not those the shift put
        in effect (the tier restarted with its config weights, or a hand edit), applied again, as
        the failover owns the weights until it is done. Whether they were re-applied."""
        applied = self.applied or {}
        try:
            got = await calls.get_global_weights(queue=tq, summary="read global weights: verification failed")
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                raise
            return False  # unreadable: verification goes on as before
        in_effect = {r: got.weights.get(r, 0) for r in applied}
        if not drift(in_effect, applied):
            return False
        change = await global_weights.apply(
            tq,
            applied,
            "failover: the global tier had lost the shift's weights; re-applied",
            "re-apply the failover's weights",
        )
        self.reasserted.append(change)
        self.phases.note(
            f"re-applied {len(self.reasserted)}",
            f"the global tier had {fmt_weights(got.weights)}, not the shift's {fmt_weights(applied)} "
            "(restarted with its config weights, or edited by hand): applied again",
        )
        return True

    async def compensate(self, inp: FailoverInput, res: FailoverResult, tq: str) -> None:
        self.phases.enter(
            phases.PHASE_COMPENSATE, "failure after the shift: deciding whether to restore weights"
        )
        sources = [s for s in (res.source or "").split(",") if s]
        dead = []
        for s in sources:
            try:
                p = await calls.probe_region(
                    RegionRequest(region=s),
                    probe_timeout_s=inp.spec.probe_timeout_s,
                    summary=f"probe source {s}",
                )
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
            change = await global_weights.apply_and_wait(
                tq,
                res.weights_before,
                "failover compensation",
                "restore previous weights",
                inp.spec.global_propagation_timeout_s,
            )
        except (ActivityError, ApplicationError) as exc:
            if not workflow.patched(COMPENSATION_FAILED_PATCH):
                raise  # histories from before the patch ended here, failed with the raw activity error
            # The operator must learn that traffic is still on the target, and why it could not move back.
            res.compensated = "compensation_failed"
            res.error = (
                f"{res.error}; compensation failed, weights left at {fmt_weights(res.weights_after or {})}: "
                f"{cause_of(exc)}"
            )
            self.phases.note("compensation", f"FAILED: {cause_of(exc)}")
            return
        res.changes.append(change)
        res.weights_after = change.weights
        res.compensated = "restored_weights"
        self.phases.note("compensation", f"restored {fmt_weights(change.weights)} ({change.propagation})")

    # --- helpers ----------------------------------------------------------------------------------

    def note_shortfall(self, plan: FailoverPlan) -> None:
        if plan.shortfall:
            # Reported, never a refusal in an emergency: traffic on a short target beats a dead source.
            self.phases.note(
                "capacity shortfall",
                f"{plan.target} needs {plan.target_replicas_needed} replicas "
                f"({plan.sizing}); max_replicas {plan.max_replicas}",
            )
        for r, need in plan.receivers_replicas.items():
            if need.shortfall:
                # Never a refusal: the receiver takes part of the share, on as many as it can have.
                self.phases.note(
                    f"capacity shortfall {r}",
                    f"{r} needs {need.needed} replicas ({need.sizing}); max_replicas {need.max_replicas}",
                )


async def _none() -> None:
    return None


async def plan_preflight(inp: FailoverInput, tq: str) -> tuple[FailoverPlan, dict[str, int], Capacity]:
    """The preflight's reads and the plan made of them, with the weights and capacity read: the
    Failover's, and `drctl failover --dry-run`'s (through FleetRead, workflows/reads.py)."""
    spec = inp.spec
    weights = (await calls.get_global_weights(queue=tq)).weights
    probe_task = None
    if not inp.force:
        probe_task = calls.probe_region(
            RegionRequest(region=inp.target),
            probe_timeout_s=spec.probe_timeout_s,
            summary=f"probe target {inp.target}",
        )
    cap_task = calls.get_capacity(
        RegionRequest(region=inp.target), queue=tq, summary=f"capacity of {inp.target}"
    )
    probe, cap = await asyncio.gather(probe_task or _none(), cap_task)
    after = placed(inp, weights)
    plan = plan_failover(
        spec,
        weights,
        inp.target,
        inp.source,
        cap,
        emergency=inp.emergency,
        force=inp.force,
        target_issue=target_problem(probe, inp.emergency, spec.fail_on_degraded),
        after=after,
        # Other receivers take part of the share and are scaled for it: the target is sized for its own part.
        spread=after is not None and bool(receivers.to_size(inp, weights, after)),
    )
    return plan, weights, cap


def placed(inp: FailoverInput, weights: dict[str, int]) -> dict[str, int] | None:
    """The weights after a monitor's failover: the source's share over its receivers, placed by the
    decision core's one placement (the `failover` rule's), from the weights in effect now. None for
    an operator's failover (all onto the target) or when the source has no share to place."""
    receivers = inp.spread_over()
    if not receivers or inp.source is None or weights.get(inp.source, 0) <= 0:
        return None
    return place(
        weights, {inp.source: float(weights[inp.source])}, receivers, inp.capacity_points, inp.spec.weights
    )
