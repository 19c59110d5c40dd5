"""Notifications: the `Notify` child workflow, and `Notifier`, the one-line helper operations call.

Why a child workflow with ParentClosePolicy.ABANDON rather than an activity started from the
operation itself: a pending activity is cancelled when its workflow completes (or continues as
new), so an operation would have to wait out a down receiver's retries before returning its
result. An abandoned child outlives its parent; the parent waits only until the child has
*started* (one server round trip, no receiver involved), never for delivery. Delivery then
retries with backoff inside the child, bounded by each webhook's retry_for_s, and a child that
gave up ends Failed in the UI under `notify/<fleet>/...`, visible without touching the operation.

With no webhook interested in an event, nothing is scheduled: no command, no history event, so
histories recorded without notifications replay unchanged.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from drctl.models import notify as ev
    from drctl.models.drill import DrillReport
    from drctl.models.failover import FailoverInput, FailoverResult
    from drctl.models.fleet_spec import FleetSpec
    from drctl.models.monitor import MonitorState
    from drctl.models.monitor_decisions import Decision
    from drctl.models.notify import DeliverInput, Delivery, Event, NotifyInput, NotifyResult
    from drctl.models.upgrade import Outcome, UpgradeResult
    from workflows import calls


@workflow.defn(name="Notify")
class Notify:
    @workflow.run
    async def run(self, inp: NotifyInput) -> NotifyResult:
        # One activity per webhook, concurrently: a slow receiver never holds back the others.
        calls = [self._deliver(inp.event, w) for w in inp.webhooks]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        res = NotifyResult()
        for hook, out in zip(inp.webhooks, outcomes, strict=True):
            if isinstance(out, BaseException):
                cause = out.cause if isinstance(out, ActivityError) and out.cause else out
                # .message: str() of an ApplicationError repeats its type, which the message already leads with.
                res.failed[hook.name] = cause.message if isinstance(cause, FailureError) else str(cause)
            else:
                res.delivered.append(hook.name)
        if res.failed:
            # Honest in the UI: a notification that never arrived ends Failed, with who missed it.
            raise ApplicationError(
                f"{inp.event.kind} not delivered to: "
                + "; ".join(f"{k}: {v}" for k, v in res.failed.items()),
                res,
                type="NotificationFailed",
                non_retryable=True,
            )
        return res

    async def _deliver(self, event: Event, hook: ev.WebhookSpec) -> Delivery:
        return await calls.notify_webhook(
            DeliverInput(webhook=hook, event=event), summary=f"{event.kind} → {hook.name} ({hook.format})"
        )


class Notifier:
    """Held by an operation; each event method is one line at its event point."""

    def __init__(self, spec: FleetSpec, alert: str | None = None) -> None:
        self.spec = spec
        self.alert = alert  # the monitor's last alert, so only a change notifies
        self._starts: list[asyncio.Future[None]] = []

    def wants(self, kind: str) -> bool:
        """Whether any webhook takes events of `kind` (checked before scheduling anything for one)."""
        return any(kind in w.events for w in self.spec.webhooks)

    def emit(self, event: Event) -> None:
        hooks = [w for w in self.spec.webhooks if w.wants(event)]
        if not hooks:
            return
        event.run_id = workflow.info().run_id
        self._starts.append(asyncio.ensure_future(self._start(NotifyInput(event=event, webhooks=hooks))))

    async def flush(self) -> None:
        """Wait until every child has started (not delivered): call before completing or continuing."""
        starts, self._starts = self._starts, []
        if starts:
            await asyncio.gather(*starts)

    async def _start(self, inp: NotifyInput) -> None:
        e = inp.event
        try:
            await workflow.start_child_workflow(
                Notify.run,
                inp,
                id=f"notify/{e.fleet}/{e.kind}/{workflow.uuid4().hex[:12]}",
                task_queue=self.spec.task_queue,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                execution_timeout=timedelta(seconds=max(w.retry_for_s for w in inp.webhooks) + 60),
                static_summary=calls.shown_summary(e.summary),
            )
        except WorkflowAlreadyStartedError as exc:
            workflow.logger.warning("notification %s not sent: %s", e.kind, exc)

    def _base(self) -> dict[str, Any]:
        info = workflow.info()
        return {"fleet": self.spec.fleet, "wid": info.workflow_id, "at": workflow.now()}

    # --- event points -------------------------------------------------------------------------

    def approval_pending(self, what: str, initiator: str | None, *, left_s: float, reminder: bool) -> None:
        self.emit(
            ev.approval_pending(
                **self._base(), what=what, initiator=initiator, left_s=left_s, reminder=reminder
            )
        )

    def failover_started(self, inp: FailoverInput, initiator: str | None = None) -> None:
        self.emit(
            ev.failover_started(
                **self._base(),
                source=inp.source,
                target=inp.target,
                initiator=initiator or inp.initiator,
                reason=inp.reason or "",
                emergency=inp.emergency,
            )
        )

    async def failover_ended(self, res: FailoverResult) -> None:
        # The event's fields are the result's, by the same names.
        fields = {"status", "source", "target", "error", "rto_s", "rto_target_s", "rto_met"}
        fields |= {"slo_restored_s", "slo_met", "slo_evidence"}
        self.emit(ev.failover_ended(**self._base(), **res.model_dump(include=fields)))
        await self.flush()

    def monitor_alert(self, state: MonitorState) -> None:
        regions = {name: t.state.value for name, t in state.trackers.items()}
        for e in ev.alert_changed(**self._base(), before=self.alert, after=state.alert, regions=regions):
            self.emit(e)
        self.alert = state.alert

    def rebalance(self, d: Decision) -> None:
        """A rebalance step the monitor advised (`failover.rebalance: advise`) or applied."""
        self.emit(ev.rebalance_decided(**self._base(), decision=d))

    def tier_changed(self, d: Decision) -> None:
        """The tier watch saw weights drctl did not set, or the data plane take a region out or back."""
        self.emit(ev.tier_changed(**self._base(), decision=d))

    async def drill_verdict(self, report: DrillReport) -> None:
        self.emit(
            ev.drill_verdict(
                **self._base(),
                verdict=report.verdict.value,
                experiment=report.experiment,
                target=report.target_region,
                reasons=report.reasons,
                rto_s=report.measured_rto_s,
                rto_target_s=report.rto_target_s,
            )
        )
        await self.flush()

    async def upgrade_ended(self, res: UpgradeResult) -> None:
        # An aborted wave was rolled back too: the operator asked, but the fleet still changed back.
        rolled = [
            w.region
            for w in res.waves
            if w.outcome in (Outcome.ROLLED_BACK, Outcome.ABORTED, Outcome.ROLLBACK_FAILED)
        ]
        if res.outcome in (Outcome.ROLLED_BACK, Outcome.ROLLBACK_FAILED) or rolled:
            self.emit(
                ev.upgrade_rolled_back(
                    **self._base(),
                    image=res.image,
                    outcome=res.outcome.value,
                    region=res.failed_region or (rolled[0] if rolled else None),
                    reason=res.reason,
                    metric=res.failed_metric,
                )
            )
        await self.flush()


WORKFLOWS: list[type] = [Notify]
