"""The notification events workflows build: exact summaries, severities, PagerDuty actions and
dedup keys (a resolve only closes its trigger when the keys match)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from drctl.config.schema import WebhookConfig
from drctl.models import notify as n
from tests.support.builders import failover_ended_event

AT = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def _dump(e: n.Event) -> dict[str, Any]:
    return e.model_dump()


def _base(**kw: Any) -> dict[str, Any]:
    return {"fleet": "prod", "workflow_id": "wf/1", "run_id": None, "region": None, "at": AT, **kw}


def _event(
    kind: str,
    severity: str,
    action: str | None,
    dedup_key: str,
    summary: str,
    details: dict[str, Any],
    **kw: Any,
) -> dict[str, Any]:
    """The dump of an event of fleet prod at AT: these fields, the rest as `_base` has them."""
    fields = {"kind": kind, "severity": severity, "action": action, "dedup_key": dedup_key}
    return _base(**fields, summary=summary, details=details, **kw)


def test_failover_started_says_who_and_why() -> None:
    e = n.failover_started(
        "prod",
        "wf/1",
        AT,
        source="us-west-1",
        target="us-east-1",
        initiator="monitor",
        reason="us-west-1 UNHEALTHY",
        emergency=True,
    )
    assert _dump(e) == _event(
        "failover.started",
        "warning",
        None,
        "drctl/prod/failover",
        "[prod] failover to us-east-1 started (emergency, by monitor): us-west-1 UNHEALTHY",
        {
            "source": "us-west-1",
            "target": "us-east-1",
            "initiator": "monitor",
            "mode": "emergency",
            "reason": "us-west-1 UNHEALTHY",
        },
        region="us-east-1",
    )
    quiet = n.failover_started(
        "prod", "wf/1", AT, source=None, target="us-east-1", initiator="cli", reason="", emergency=False
    )
    assert quiet.summary == "[prod] failover to us-east-1 started (normal, by cli)"
    assert quiet.details["mode"] == "normal"


def test_a_succeeded_failover_resolves_with_its_rto() -> None:
    e = failover_ended_event("prod", "wf/1", AT, rto_s=12.5, rto_target_s=30.0, rto_met=True)
    assert _dump(e) == _event(
        "failover.succeeded",
        "info",
        "resolve",
        "drctl/prod/failover",
        "[prod] failover to us-east-1 succeeded: RTO 12.5 s (target 30 s)",
        {
            "status": "succeeded",
            "source": "us-west-1",
            "target": "us-east-1",
            "rto_s": 12.5,
            "rto_target_s": 30.0,
            "rto_met": True,
            "slo_restored_s": None,
            "slo_met": None,
            "slo_evidence": None,
            "error": None,
        },
        region="us-east-1",
    )
    unmeasured = failover_ended_event("prod", "wf/1", AT, source=None, rto_target_s=30.0)
    assert unmeasured.summary == "[prod] failover to us-east-1 succeeded: RTO not measured"
    # Served elsewhere but still slow: the summary says so, naming the metric.
    slow = failover_ended_event(
        "prod", "wf/1", AT, rto_s=9.0, rto_target_s=30.0, rto_met=True, slo_met=False,
        slo_evidence="not restored within 30s: ttft_p99 412 ms > 200 ms at 41.0s",
    )  # fmt: skip
    assert slow.summary == (
        "[prod] failover to us-east-1 succeeded: RTO 9 s (target 30 s); "
        "SLO not restored within 30s: ttft_p99 412 ms > 200 ms at 41.0s"
    )
    assert (slow.details["slo_met"], slow.severity) == (False, "info")


def test_a_failover_that_did_not_succeed_pages_by_how_bad_it_is() -> None:
    def ended(status: str, error: str | None) -> n.Event:
        return failover_ended_event(
            "prod", "wf/1", AT, status=status, error=error, rto_target_s=30.0, rto_met=False
        )

    failed = ended("failed", "verify failed")
    assert _dump(failed) == _event(
        "failover.failed",
        "critical",
        "trigger",
        "drctl/prod/failover",
        "[prod] failover to us-east-1 failed: verify failed",
        {
            "status": "failed",
            "source": "us-west-1",
            "target": "us-east-1",
            "rto_s": None,
            "rto_target_s": 30.0,
            "rto_met": False,
            "slo_restored_s": None,
            "slo_met": None,
            "slo_evidence": None,
            "error": "verify failed",
        },
        region="us-east-1",
    )
    assert ended("unverified", None).severity == "critical"
    assert ended("unverified", None).summary == "[prod] failover to us-east-1 unverified: no reason given"
    for status in ("refused", "aborted"):
        e = ended(status, "x")
        assert (e.severity, e.action, e.kind) == ("error", "trigger", "failover.failed")


def test_alert_changes_resolve_the_old_and_raise_the_new() -> None:
    regions = {"us-west-1": "UNHEALTHY", "us-east-1": "HEALTHY"}
    assert n.alert_changed("prod", "m", AT, before="X", after="X", regions=regions) == []
    assert n.alert_changed("prod", "m", AT, before=None, after=None, regions=regions) == []
    resolved, raised = n.alert_changed(
        "prod", "m", AT, before="NO_FAILOVER_TARGET", after="ALL_REGIONS_UNHEALTHY", regions=regions
    )
    states = "us-west-1 UNHEALTHY, us-east-1 HEALTHY"
    assert _dump(resolved) == _event(
        "alert.resolved",
        "info",
        "resolve",
        "drctl/prod/NO_FAILOVER_TARGET",
        f"[prod] NO_FAILOVER_TARGET resolved: {states}",
        {"alert": "NO_FAILOVER_TARGET", **regions},
        workflow_id="m",
    )
    assert _dump(raised) == _event(
        "alert.raised",
        "critical",
        "trigger",
        "drctl/prod/ALL_REGIONS_UNHEALTHY",
        f"[prod] ALL_REGIONS_UNHEALTHY: {states}",
        {"alert": "ALL_REGIONS_UNHEALTHY", **regions},
        workflow_id="m",
    )
    only_new = n.alert_changed("prod", "m", AT, before=None, after="A", regions=regions)
    assert [e.kind for e in only_new] == ["alert.raised"]
    only_old = n.alert_changed("prod", "m", AT, before="A", after=None, regions=regions)
    assert [e.kind for e in only_old] == ["alert.resolved"]


def test_drill_verdicts_resolve_on_pass_and_page_otherwise() -> None:
    passed = n.drill_verdict(
        "prod",
        "drill/prod/1",
        AT,
        verdict="PASS",
        experiment="region-outage",
        target="us-west-1",
        reasons=[],
        rto_s=8.0,
        rto_target_s=30.0,
    )
    assert _dump(passed) == _event(
        "drill.verdict",
        "info",
        "resolve",
        "drctl/prod/drill",
        "[prod] drill region-outage on us-west-1: PASS",
        {
            "verdict": "PASS",
            "experiment": "region-outage",
            "target": "us-west-1",
            "measured_rto_s": 8.0,
            "rto_target_s": 30.0,
            "reasons": "",
        },
        workflow_id="drill/prod/1",
        region="us-west-1",
    )
    failed = n.drill_verdict(
        "prod",
        "d",
        AT,
        verdict="FAILED",
        experiment="x",
        target="us-west-1",
        reasons=["RTO 40 s over 30 s", "rollback failed"],
        rto_s=40.0,
        rto_target_s=30.0,
    )
    assert (failed.severity, failed.action) == ("error", "trigger")
    assert failed.summary == "[prod] drill x on us-west-1: FAILED: RTO 40 s over 30 s; rollback failed"
    assert failed.details["reasons"] == "RTO 40 s over 30 s; rollback failed"


def test_upgrade_rollbacks_page_and_a_failed_rollback_is_critical() -> None:
    e = n.upgrade_rolled_back(
        "prod",
        "upgrade/prod/1",
        AT,
        image="vllm:v2",
        outcome="ROLLED_BACK",
        region="us-west-1",
        reason="error rate 5%",
        metric="error_rate",
    )
    assert _dump(e) == _event(
        "upgrade.rolled_back",
        "warning",
        "trigger",
        "drctl/prod/upgrade",
        "[prod] upgrade to vllm:v2 ROLLED_BACK: error rate 5%",
        {
            "image": "vllm:v2",
            "outcome": "ROLLED_BACK",
            "region": "us-west-1",
            "reason": "error rate 5%",
            "failed_metric": "error_rate",
        },
        workflow_id="upgrade/prod/1",
        region="us-west-1",
    )
    failed = n.upgrade_rolled_back(
        "prod", "u", AT, image="i", outcome="ROLLBACK_FAILED", region=None, reason="r", metric=None
    )
    assert failed.severity == "critical"


def test_the_test_ping_is_an_info_incident() -> None:
    assert _dump(n.ping_event("prod", "notify/prod", AT, by="alice")) == _event(
        "notify.test",
        "info",
        "trigger",
        "drctl/prod/test",
        "[prod] drctl test notification from alice; safe to resolve",
        {"sent_by": "alice"},
        workflow_id="notify/prod",
    )


def test_webhook_specs_carry_no_secret_and_pick_their_events() -> None:
    cfg = WebhookConfig(
        name="pd",
        format="pagerduty",
        routing_key_env="PD_KEY",
        events=["failover.started", "failover.failed"],
        timeout_s=3,
        retry_for_s=60,
        url="http://127.0.0.1:9/x",
    )
    spec = n.WebhookSpec.from_config(cfg)
    assert spec.model_dump() == {
        "name": "pd",
        "format": "pagerduty",
        "events": ["failover.started", "failover.failed"],
        "timeout_s": 3.0,
        "retry_for_s": 60.0,
    }
    started = n.failover_started(
        "prod", "w", AT, source=None, target="t", initiator="cli", reason="", emergency=False
    )
    failed = failover_ended_event("prod", "w", AT, status="failed", source=None, target="t", error="e")
    succeeded = failover_ended_event("prod", "w", AT, source=None, target="t", rto_s=1, rto_met=True)
    # PagerDuty has no action for an informational event; it also skips events it was not given.
    assert not spec.wants(started) and spec.wants(failed) and not spec.wants(succeeded)
    slack = n.WebhookSpec(**{**spec.model_dump(), "format": "slack"})
    assert slack.wants(started) and slack.wants(failed) and not slack.wants(succeeded)
