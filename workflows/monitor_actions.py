"""The monitor's actions: start a Failover or Failback child, record its outcome, back off.

`workflows.monitor.FleetMonitor` decides when; `MonitorActions` says how, on the `MonitorRun` it is
handed. Children are started with parent_close_policy ABANDON: a monitor continuing as new (or
being stopped) must never cancel a failover half-way.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import ChildWorkflowError, FailureError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from drctl.models import search_attributes as sa
    from drctl.models.failover import (
        SIGNAL_SUPERSEDE,
        FailbackInput,
        FailbackResult,
        FailoverInput,
        FailoverResult,
        SupersedeNotice,
    )
    from drctl.models.health import RegionState
    from drctl.models.monitor import FailoverRecord, MonitorState
    from drctl.models.monitor_decisions import Decision
    from drctl.models.outcome import result_from
    from drctl.models.rebalance import RebalanceInput, RebalanceResult
    from workflows import calls
    from workflows.monitor_run import MonitorRun

R = TypeVar("R", FailoverResult, FailbackResult, RebalanceResult)
# The monitor's children record it as their initiator (DrctlInitiator); older histories replay without.
INITIATOR_PATCH = "monitor-child-initiator"
# A failover whose id is held by an earlier one that only watches its objective supersedes it.
SUPERSEDE_PATCH = "monitor-failover-supersedes"
SUPERSEDE_TRIES = 30
SUPERSEDE_PAUSE_S = 1.0


async def supersede(workflow_id: str, by: str, reason: str) -> None:
    """Tell the failover running as `workflow_id` to end its objective watch; a failover that is not
    verified yet keeps the notice and ends the watch as soon as it starts it. None running: nothing to do."""
    try:
        await workflow.get_external_workflow_handle(workflow_id).signal(
            SIGNAL_SUPERSEDE, SupersedeNotice(by=by, reason=reason)
        )
    except FailureError as exc:
        workflow.logger.info("supersede %s: %s", workflow_id, exc)


async def child_result(handle: workflow.ChildWorkflowHandle[Any, R], model: type[R]) -> R:
    """The child's result: returned when it succeeded, carried by its failure when it did not."""
    try:
        return await handle
    except ChildWorkflowError as exc:
        res = result_from(exc, model)
        if res is None:
            raise  # failed without a result (terminated, a bug): reported as an error by the caller
        return res


def child_attrs(
    fleet: str, operation: str, source: str, target: str | None, initiator: str | None = None
) -> TypedSearchAttributes:
    pairs = [
        SearchAttributePair(sa.FLEET, fleet),
        SearchAttributePair(sa.OPERATION, operation),
        SearchAttributePair(sa.PHASE, "pending"),
        SearchAttributePair(sa.SOURCE_REGION, source),
    ]
    if target:
        pairs.append(SearchAttributePair(sa.TARGET_REGION, target))
    if initiator:
        pairs.append(SearchAttributePair(sa.INITIATOR, initiator))
    return TypedSearchAttributes(pairs)


def initiator() -> str | None:
    """The identity an automatic operation records: this monitor (None on histories from before)."""
    return f"drctl-monitor@{workflow.info().workflow_id}" if workflow.patched(INITIATOR_PATCH) else None


async def run_rebalance(inp: RebalanceInput, summary: str) -> RebalanceResult:
    """The monitor's Rebalance child (`rebalance/<fleet>`, ABANDON), awaited: its result, from its
    failure details when it failed. Raises WorkflowAlreadyStartedError or ChildWorkflowError."""
    spec = inp.spec
    handle = await workflow.start_child_workflow(
        "Rebalance",
        inp,
        id=f"rebalance/{spec.fleet}",
        task_queue=spec.task_queue,
        result_type=RebalanceResult,
        parent_close_policy=workflow.ParentClosePolicy.ABANDON,
        search_attributes=child_attrs(spec.fleet, "rebalance", "", (inp.gaining or [""])[0], initiator()),
        memo={"fleet": spec.fleet, "operation": "rebalance", "initiator": "monitor"},
        static_summary=calls.shown_summary(summary),
    )
    return await child_result(handle, RebalanceResult)


def receivers_for(s: MonitorState, source: str, target: str) -> list[str]:
    """The regions a monitor's failover spreads `source`'s share over: every HEALTHY region the
    worker resolves and no recent failover failed on (the decision core's receivers; never one
    SUSPECT, RECOVERING or down), the chosen target among them. Only the target when it is the one
    region left (a RECOVERING target, chosen because nothing else can serve)."""
    healthy = {
        r
        for r, t in s.trackers.items()
        if r != source
        and t.state is RegionState.HEALTHY
        and r not in s.unresolved
        and (r not in s.avoid_targets or r == target)
    }
    return sorted(healthy | {target}) if target in healthy else [target]


class MonitorActions:
    """The monitor's children; each one clears `run.child` when it ends."""

    def __init__(self, run: MonitorRun) -> None:
        self.run = run

    async def failover(self, source: str, target: str) -> None:
        s = self.run.state
        t = s.trackers[source]
        wid = f"failover/{s.spec.fleet}"
        rec = FailoverRecord(workflow_id=wid, source=source, target=target, started_at=workflow.now())
        self.run.active = rec
        by = initiator()
        self._decided(rec, s.spec.weights, {}, None)
        inp = FailoverInput(
            spec=s.spec,
            target=target,
            source=source,
            emergency=True,
            fault_at=t.first_failure_at,
            last_good_at=t.last_good_at,
            initiator=by or "monitor",
            reason=f"{source} UNHEALTHY: {t.last_reason}",
            receivers=receivers_for(s, source, target),
            capacity_points=dict(s.rebalance_memory.points),
        )
        try:
            handle = await self._start_failover(wid, inp, by)
            rec.run_id = handle.first_execution_run_id
            done = asyncio.ensure_future(child_result(handle, FailoverResult))
            # Done for the fleet at verification (the failover's `failover_verified` signal): the next
            # decision need not wait for its objective watch, which goes on as `run.watching`.
            await workflow.wait_condition(lambda: done.done() or rec.run_id in self.run.verified)
            if not done.done():
                note = self.run.verified.pop(rec.run_id or "")
                rec.status, rec.rto_s, rec.finished_at = "succeeded", note.rto_s, workflow.now()
                self._moved(rec, target)
                self._decided(rec, s.spec.weights, note.weights_after, None)
                self._settle(rec, target)
                self.run.watching = asyncio.current_task()
                try:
                    result = await done
                    rec.status, rec.rto_s = result.status, result.rto_s
                finally:
                    self.run.watching = None
                    self.run.poke = True
                return
            result = done.result()
            self.run.verified.pop(rec.run_id or "", None)
            rec.status, rec.rto_s, rec.finished_at = result.status, result.rto_s, workflow.now()
            self._decided(rec, result.weights_before, result.weights_after, result.error)
            if result.status in ("succeeded", "unverified"):
                # Unverified still moved the traffic: it awaits failback like a verified failover
                # (failing over again would only repeat the same unproven shift).
                self._moved(rec, target)
            else:
                self.back_off(f"failover {result.status}: {result.error}")
        except (WorkflowAlreadyStartedError, ChildWorkflowError) as exc:
            rec.status, rec.finished_at = (
                "not started" if isinstance(exc, WorkflowAlreadyStartedError) else "error",
                workflow.now(),
            )
            self.back_off(f"failover {source} → {target} did not run: {exc}")
        finally:
            if rec.finished_at is None or self.run.active is rec:
                self._settle(rec, target)

    def _moved(self, rec: FailoverRecord, target: str) -> None:
        """Traffic left `rec.source` for `target`: it awaits failback. A record whose source is this
        target is done: the failover itself gave that region its traffic back."""
        s = self.run.state
        s.failed_over = [r for r in s.failed_over if r.source != target]
        s.failed_over.append(rec)
        s.avoid_targets.pop(target, None)

    def _settle(self, rec: FailoverRecord, target: str) -> None:
        """The failover is done for the fleet (verified, or ended): the next decision may come."""
        s = self.run.state
        if rec.status not in ("succeeded", "unverified"):
            # The next attempt goes to another healthy region first (this one's worker may be dead).
            s.avoid_targets[target] = workflow.now() + timedelta(seconds=max(300.0, 10 * s.spec.interval_s))
        s.last_failover = rec
        self.run.active = None
        self.run.child_done()

    async def _start_failover(
        self, wid: str, inp: FailoverInput, by: str | None
    ) -> workflow.ChildWorkflowHandle[Any, FailoverResult]:
        """Start the Failover child. An earlier failover still watching its objective holds the id: it
        is told to stop (`supersede`), and the start is tried again, a bounded number of times."""
        s = self.run.state
        for attempt in range(SUPERSEDE_TRIES):
            try:
                return await workflow.start_child_workflow(
                    "Failover",
                    inp,
                    id=wid,
                    task_queue=s.spec.task_queue,
                    result_type=FailoverResult,
                    parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                    search_attributes=child_attrs(s.spec.fleet, "failover", inp.source or "", inp.target, by),
                    memo={"fleet": s.spec.fleet, "operation": "failover", "initiator": by or "monitor"},
                    static_summary=calls.shown_summary(
                        f"automatic failover {inp.source} → {inp.target}" + (f" by {by}" if by else "")
                    ),
                )
            except WorkflowAlreadyStartedError:
                if attempt == SUPERSEDE_TRIES - 1 or not workflow.patched(SUPERSEDE_PATCH):
                    raise
                await supersede(wid, by or "monitor", f"failover {inp.source} → {inp.target} takes over")
                await workflow.sleep(SUPERSEDE_PAUSE_S)
        raise AssertionError("unreachable")  # the loop returns or raises

    async def failback(self, rec: FailoverRecord) -> None:
        s = self.run.state
        wid = f"failback/{s.spec.fleet}"
        by = initiator()
        try:
            handle = await workflow.start_child_workflow(
                "Failback",
                FailbackInput(
                    spec=s.spec, region=rec.source, stabilization_window_s=0, initiator=by or "monitor"
                ),
                id=wid,
                task_queue=s.spec.task_queue,
                result_type=FailbackResult,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                search_attributes=child_attrs(s.spec.fleet, "failback", rec.target, rec.source, by),
                memo={"fleet": s.spec.fleet, "operation": "failback", "initiator": by or "monitor"},
                static_summary=calls.shown_summary(
                    f"automatic failback to {rec.source}" + (f" by {by}" if by else "")
                ),
            )
            result = await child_result(handle, FailbackResult)
            s.last_failback = f"{result.status} at {workflow.now().isoformat()}"
            if result.status in ("succeeded", "not_needed"):
                s.failed_over = [r for r in s.failed_over if r.source != rec.source]
            elif result.status == "preempted":
                # A failover took the fleet: it answers for the traffic now, and no back-off delays it.
                workflow.logger.info("failback to %s yielded: %s", rec.source, result.error)
            else:
                self.back_off(f"failback {result.status}: {result.error}")
        except (WorkflowAlreadyStartedError, ChildWorkflowError) as exc:
            s.last_failback = f"error: {exc}"
            self.back_off(f"failback to {rec.source} did not run: {exc}")
        finally:
            self.run.child_done()

    def _decided(
        self,
        rec: FailoverRecord,
        before: dict[str, int],
        after: dict[str, int],
        error: str | None,
    ) -> None:
        """The failover in the fleet's decision log, with the quorum's views that allowed it."""
        s = self.run.state
        t = s.trackers[rec.source]
        vote = s.votes.get(rec.source)
        s.decisions.record(
            Decision(
                at=workflow.now(),
                action="failover",
                mode=s.policy,
                outcome="started" if rec.status == "running" else ("applied" if not error else "failed"),
                weights_before=before,
                weights_after=after,
                reasons=[f"{rec.source} {t.state.value}: {t.last_reason} → {rec.target} ({rec.status})"],
                evidence={
                    rec.source: {
                        "consecutive_failures": t.consecutive_failures,
                        "last_status": t.last_status.value if t.last_status else "-",
                        "failing_fraction": t.last_failing_fraction,
                    }
                },
                votes=dict(vote.views) if vote else {},
                error=error,
            )
        )

    def back_off(self, why: str) -> None:
        s = self.run.state
        # Retrying every round would start a workflow every few seconds against the same obstacle.
        delay = max(30.0, 3 * s.spec.interval_s)
        s.next_failover_attempt_at = workflow.now() + timedelta(seconds=delay)
        workflow.logger.warning("%s; next attempt in %.0f s", why, delay)
