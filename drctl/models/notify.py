"""Notification events and the pure logic that builds them from operation results.

Workflows build events here (no I/O), the `Notify` child workflow carries them, and the provider
renders them per webhook format. Only non-secret webhook facts (name, format, events, timeouts)
travel in workflow input; URLs and routing keys stay in the worker's config and environment.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from drctl.config.schema import NotifyEvent, WebhookConfig
from drctl.config.strict import BoundedScalars
from drctl.models.monitor_decisions import Decision

Severity = Literal["critical", "error", "warning", "info"]
PagerDutyAction = Literal["trigger", "resolve"]
Detail = str | int | float | bool | None


class WebhookSpec(BoundedScalars):
    """What a workflow may know about a webhook: never its URL or key."""

    name: str
    format: Literal["json", "slack", "pagerduty"]
    events: list[NotifyEvent]
    timeout_s: float
    retry_for_s: float

    @classmethod
    def from_config(cls, w: WebhookConfig) -> WebhookSpec:
        return cls(
            name=w.name,
            format=w.format,
            events=list(w.events),
            timeout_s=w.timeout_s,
            retry_for_s=w.retry_for_s,
        )

    def wants(self, event: Event) -> bool:
        # PagerDuty pages or resolves; an informational event (failover started) has no action there.
        return event.kind in self.events and (self.format != "pagerduty" or event.action is not None)


class Event(BaseModel):
    kind: NotifyEvent | Literal["notify.test"]
    fleet: str
    summary: str = Field(description="One line, as a chat message or an incident title shows it.")
    severity: Severity
    action: PagerDutyAction | None = Field(None, description="PagerDuty event_action; None: not an incident.")
    dedup_key: str = Field(description="Stable per fleet and incident, so a resolve closes its trigger.")
    workflow_id: str
    run_id: str | None = None
    region: str | None = None
    at: datetime
    details: dict[str, Detail] = Field(default_factory=dict)


class NotifyInput(BaseModel):
    event: Event
    webhooks: list[WebhookSpec]


class DeliverInput(BaseModel):
    webhook: WebhookSpec
    event: Event


class Delivery(BaseModel):
    webhook: str
    status_code: int
    skipped: bool = False


class NotifyResult(BaseModel):
    delivered: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)


def dedup_key(fleet: str, incident: str) -> str:
    return f"drctl/{fleet}/{incident}"


def failover_started(
    fleet: str,
    wid: str,
    at: datetime,
    *,
    source: str | None,
    target: str,
    initiator: str,
    reason: str,
    emergency: bool,
) -> Event:
    mode = "emergency" if emergency else "normal"
    return Event(
        kind="failover.started",
        fleet=fleet,
        severity="warning",
        dedup_key=dedup_key(fleet, "failover"),
        summary=f"[{fleet}] failover to {target} started ({mode}, by {initiator})"
        + (f": {reason}" if reason else ""),
        workflow_id=wid,
        region=target,
        at=at,
        details={"source": source, "target": target, "initiator": initiator, "mode": mode, "reason": reason},
    )


def failover_ended(
    fleet: str,
    wid: str,
    at: datetime,
    *,
    status: str,
    source: str | None,
    target: str,
    error: str | None,
    rto_s: float | None,
    rto_target_s: float,
    rto_met: bool | None,
    slo_restored_s: float | None = None,
    slo_met: bool | None = None,
    slo_evidence: str | None = None,
) -> Event:
    details: dict[str, Detail] = {
        "status": status,
        "source": source,
        "target": target,
        "rto_s": rto_s,
        "rto_target_s": rto_target_s,
        "rto_met": rto_met,
        "slo_restored_s": slo_restored_s,
        "slo_met": slo_met,
        "slo_evidence": slo_evidence,
        "error": error,
    }
    kind: NotifyEvent
    severity: Severity
    action: PagerDutyAction
    if status == "succeeded":
        rto = f"RTO {rto_s:g} s (target {rto_target_s:g} s)" if rto_s is not None else "RTO not measured"
        slo = f"; SLO {slo_evidence}" if slo_evidence else ""
        kind, severity, action, summary = "failover.succeeded", "info", "resolve", f"succeeded: {rto}{slo}"
    else:
        # A failover that did not run (refused, aborted) leaves the fleet as it was; one that failed may not.
        severity = "critical" if status in ("failed", "unverified") else "error"
        kind, action, summary = "failover.failed", "trigger", f"{status}: {error or 'no reason given'}"
    return Event(
        kind=kind,
        fleet=fleet,
        severity=severity,
        action=action,
        dedup_key=dedup_key(fleet, "failover"),
        summary=f"[{fleet}] failover to {target} {summary}",
        workflow_id=wid,
        region=target,
        at=at,
        details=details,
    )


def approval_pending(
    fleet: str,
    wid: str,
    at: datetime,
    *,
    what: str,
    initiator: str | None,
    left_s: float,
    reminder: bool,
) -> Event:
    """An approval gate waits (or still waits: `reminder`): who asked, how to answer, time left.

    Not a PagerDuty incident (no action): nothing would resolve it when someone approves.
    """
    left = f"{left_s / 60:.0f} min" if left_s >= 120 else f"{left_s:.0f} s"
    by = initiator or "unknown"
    return Event(
        kind="approval.pending",
        fleet=fleet,
        severity="warning",
        dedup_key=dedup_key(fleet, "approval"),
        summary=f"[{fleet}] {'reminder: ' if reminder else ''}{what} started by {by} waits for approval, "
        f"{left} left: `drctl ops approve {wid}` (another identity) or `drctl ops reject {wid}`",
        workflow_id=wid,
        at=at,
        details={
            "operation": what,
            "initiator": initiator,
            "approve": f"drctl ops approve {wid}",
            "reject": f"drctl ops reject {wid}",
            "left_s": round(left_s, 3),
            "times_out_at": (at + timedelta(seconds=left_s)).isoformat(),
            "reminder": reminder,
        },
    )


def alert_changed(
    fleet: str, wid: str, at: datetime, *, before: str | None, after: str | None, regions: dict[str, str]
) -> list[Event]:
    """The monitor's alert moved: resolve the old one, raise the new one (either may be None)."""
    if before == after:
        return []
    states = ", ".join(f"{r} {s}" for r, s in regions.items())

    def event(
        alert: str, kind: NotifyEvent, severity: Severity, action: PagerDutyAction, summary: str
    ) -> Event:
        return Event(
            kind=kind,
            fleet=fleet,
            severity=severity,
            action=action,
            dedup_key=dedup_key(fleet, alert),
            summary=summary,
            workflow_id=wid,
            at=at,
            details={"alert": alert, **regions},
        )

    out: list[Event] = []
    if before:
        out.append(
            event(before, "alert.resolved", "info", "resolve", f"[{fleet}] {before} resolved: {states}")
        )
    if after:
        out.append(event(after, "alert.raised", "critical", "trigger", f"[{fleet}] {after}: {states}"))
    return out


def drill_verdict(
    fleet: str,
    wid: str,
    at: datetime,
    *,
    verdict: str,
    experiment: str,
    target: str,
    reasons: list[str],
    rto_s: float | None,
    rto_target_s: float,
) -> Event:
    passed = verdict == "PASS"
    why = "; ".join(reasons)
    return Event(
        kind="drill.verdict",
        fleet=fleet,
        severity="info" if passed else "error",
        action="resolve" if passed else "trigger",
        dedup_key=dedup_key(fleet, "drill"),
        summary=f"[{fleet}] drill {experiment} on {target}: {verdict}" + (f": {why}" if why else ""),
        workflow_id=wid,
        region=target,
        at=at,
        details={
            "verdict": verdict,
            "experiment": experiment,
            "target": target,
            "measured_rto_s": rto_s,
            "rto_target_s": rto_target_s,
            "reasons": why,
        },
    )


def upgrade_rolled_back(
    fleet: str,
    wid: str,
    at: datetime,
    *,
    image: str,
    outcome: str,
    region: str | None,
    reason: str,
    metric: str | None,
) -> Event:
    # A region left half-upgraded by a failed rollback needs a human now.
    severity: Severity = "critical" if outcome == "ROLLBACK_FAILED" else "warning"
    return Event(
        kind="upgrade.rolled_back",
        fleet=fleet,
        severity=severity,
        action="trigger",
        dedup_key=dedup_key(fleet, "upgrade"),
        summary=f"[{fleet}] upgrade to {image} {outcome}: {reason}",
        workflow_id=wid,
        region=region,
        at=at,
        details={
            "image": image,
            "outcome": outcome,
            "region": region,
            "reason": reason,
            "failed_metric": metric,
        },
    )


def rebalance_decided(fleet: str, wid: str, at: datetime, *, decision: Decision) -> Event:
    """A rebalance step: advised (nothing moved, an operator decides) or applied by the monitor."""
    d = decision
    kind: NotifyEvent = "rebalance.advised" if d.outcome == "advised" else "rebalance.applied"
    losing = [r for r, w in d.weights_after.items() if w < d.weights_before.get(r, 0)]
    return Event(
        kind=kind,
        fleet=fleet,
        # Informational: a partial, reversible move pages nobody (PagerDuty gets no action).
        severity="warning" if d.outcome in ("advised", "failed") else "info",
        dedup_key=dedup_key(fleet, "rebalance"),
        summary=f"[{fleet}] {d.line()}"[:300],
        workflow_id=wid,
        region=losing[0] if losing else None,
        at=at,
        details={
            "action": d.action,
            "outcome": d.outcome,
            "weights_before": " ".join(f"{r}={w}" for r, w in d.weights_before.items()),
            "weights_after": " ".join(f"{r}={w}" for r, w in d.weights_after.items()),
            "reasons": "; ".join(d.reasons)[:500],
            "error": d.error,
        },
    )


def tier_changed(fleet: str, wid: str, at: datetime, *, decision: Decision) -> Event:
    """The monitor's tier watch saw what drctl did not do: weights set outside it (a hand edit, a
    break-glass failover) or a region the data plane took out of rotation (or put back)."""
    d = decision
    return Event(
        kind="tier.changed",
        fleet=fleet,
        # Not an incident by itself: the data plane acting, or an operator, is what moves users.
        severity="warning",
        dedup_key=dedup_key(fleet, "tier"),
        summary=f"[{fleet}] {d.line()}"[:300],
        workflow_id=wid,
        at=at,
        details={
            "action": d.action,
            "mode": d.mode,
            "weights_before": " ".join(f"{r}={w}" for r, w in d.weights_before.items()),
            "weights_after": " ".join(f"{r}={w}" for r, w in d.weights_after.items()),
            "reasons": "; ".join(d.reasons + d.held_back)[:500],
            "error": d.error,
        },
    )


def ping_event(fleet: str, wid: str, at: datetime, *, by: str) -> Event:
    """`drctl notify test`: proves the worker's URLs and keys work. PagerDuty opens an info incident."""
    return Event(
        kind="notify.test",
        fleet=fleet,
        severity="info",
        action="trigger",
        dedup_key=dedup_key(fleet, "test"),
        summary=f"[{fleet}] drctl test notification from {by}; safe to resolve",
        workflow_id=wid,
        at=at,
        details={"sent_by": by},
    )
