"""Webhook provider against a real local receiver: payload per format, secrets, errors, the timeout."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from drctl.config.schema import ConfigError, NotificationsConfig, WebhookConfig, parse_config
from drctl.models import notify as ev
from drctl.models.notify import WebhookSpec
from drctl.providers import notify
from drctl.providers.errors import ProviderError
from tests.support.builders import failover_ended_event
from tests.support.docs_text import page
from tests.support.receiver import closed_port_url, receiver

AT = datetime(2026, 11, 30, 4, 0, tzinfo=UTC)
LINK = "http://127.0.0.1:8233/namespaces/default/workflows/failover%2Fdemo"


def failed() -> ev.Event:
    return failover_ended_event("demo", "failover/demo", AT, status="failed", error="verification failed")


def succeeded() -> ev.Event:
    return failover_ended_event("demo", "failover/demo", AT, rto_s=4.2, rto_met=True)


async def test_json_format_posts_the_event_and_its_link() -> None:
    with receiver() as rec:
        hook = WebhookConfig(name="ops", format="json", url=rec.url + "/hook")
        assert await notify.send(hook, succeeded(), LINK) == 200
    [body] = rec.bodies("/hook")
    assert body["kind"] == "failover.succeeded" and body["fleet"] == "demo" and body["version"] == 1
    assert body["details"]["rto_s"] == 4.2 and body["link"] == LINK
    assert rec.posts[0].headers["Content-Type"] == "application/json"


async def test_slack_format_has_text_and_blocks() -> None:
    with receiver() as rec:
        hook = WebhookConfig(name="chat", format="slack", url_env="SLACK_URL")
        await notify.send(hook, failed(), LINK, env={"SLACK_URL": rec.url + "/services/T0/B0/x"})
    [body] = rec.bodies("/services/T0/B0/x")
    assert body["text"].startswith(":rotating_light: [demo] failover to us-east-1 failed")
    kinds = [b["type"] for b in body["blocks"]]
    assert kinds == ["section", "section", "context"]
    assert {"type": "mrkdwn", "text": "*error*\nverification failed", "verbatim": True} in body["blocks"][1][
        "fields"
    ]
    assert LINK in body["blocks"][2]["elements"][0]["text"]


def test_slack_cuts_long_details_to_what_slack_accepts() -> None:
    e = failed().model_copy(update={"details": {f"k{i}": "x" * 5000 for i in range(15)}})
    body = notify.render_slack(e, LINK)
    assert len(body["blocks"][1]["fields"]) == 10
    assert all(len(f["text"]) <= 2000 for f in body["blocks"][1]["fields"])


async def test_pagerduty_trigger_then_resolve_share_a_dedup_key(tmp_path: Path) -> None:
    key_file = tmp_path / "pd-key"
    key_file.write_text("R0UT1NGKEY\n")
    with receiver() as rec:
        hook = WebhookConfig(
            name="pager", format="pagerduty", url=rec.url + "/v2/enqueue", routing_key_file=str(key_file)
        )
        await notify.send(hook, failed(), LINK)
        await notify.send(hook, succeeded(), LINK)
    trigger, resolve = rec.bodies("/v2/enqueue")
    assert trigger["routing_key"] == "R0UT1NGKEY" and trigger["event_action"] == "trigger"
    assert trigger["dedup_key"] == resolve["dedup_key"] == "drctl/demo/failover"
    p = trigger["payload"]
    assert p["severity"] == "critical" and p["source"] == "drctl/demo" and p["component"] == "us-east-1"
    assert p["summary"].startswith("[demo] failover to us-east-1 failed")
    assert trigger["links"] == [{"href": LINK, "text": "Temporal: failover/demo"}]
    assert resolve["event_action"] == "resolve" and "payload" not in resolve


def test_pagerduty_only_hears_incident_events_and_severities_map() -> None:
    pd = WebhookSpec.from_config(WebhookConfig(name="p", format="pagerduty", routing_key_env="K"))
    chat = WebhookSpec.from_config(WebhookConfig(name="c", format="slack", url="http://127.0.0.1:1"))
    started = ev.failover_started(
        "demo",
        "failover/demo",
        AT,
        source=None,
        target="us-east-1",
        initiator="cli",
        reason="",
        emergency=False,
    )
    assert not pd.wants(started) and chat.wants(started)
    (raised,) = ev.alert_changed(
        "demo",
        "monitor/demo",
        AT,
        before=None,
        after="ALL_REGIONS_UNHEALTHY",
        regions={"us-west-1": "UNHEALTHY", "us-east-1": "UNHEALTHY"},
    )
    (resolved,) = ev.alert_changed(
        "demo",
        "monitor/demo",
        AT,
        before="ALL_REGIONS_UNHEALTHY",
        after=None,
        regions={"us-west-1": "HEALTHY", "us-east-1": "RECOVERING"},
    )
    assert (raised.action, raised.severity, resolved.action) == ("trigger", "critical", "resolve")
    assert raised.dedup_key == resolved.dedup_key == "drctl/demo/ALL_REGIONS_UNHEALTHY"
    refused = failover_ended_event("demo", "w", AT, status="refused", source=None, error="busy")
    assert (refused.kind, refused.severity, refused.action) == ("failover.failed", "error", "trigger")
    unverified = failover_ended_event("demo", "w", AT, status="unverified", error="no x-drctl-region header")
    assert (unverified.kind, unverified.severity) == (
        "failover.failed",
        "critical",
    )  # traffic moved, unproven
    drill = ev.drill_verdict(
        "demo",
        "drill/demo/1",
        AT,
        verdict="FAILED",
        experiment="kill-region",
        target="us-west-1",
        reasons=["RTO over target"],
        rto_s=41.0,
        rto_target_s=30,
    )
    assert (drill.severity, drill.action, drill.dedup_key) == ("error", "trigger", "drctl/demo/drill")
    only_failures = WebhookSpec.from_config(
        WebhookConfig(name="f", url="http://x", events=["failover.failed"])
    )
    assert only_failures.wants(refused) and not only_failures.wants(succeeded())


async def test_a_server_error_is_retryable_and_names_the_webhook_not_its_url() -> None:
    secret_url_path = "/services/T0/B0/s3cr3t"
    with receiver([(500, 0), (400, 0)]) as rec:
        hook = WebhookConfig(name="chat", format="slack", url=rec.url + secret_url_path)
        with pytest.raises(ProviderError) as first:
            await notify.send(hook, failed())
        with pytest.raises(ProviderError) as second:
            await notify.send(hook, failed())
    assert first.value.error.kind == "ServerError" and first.value.error.retryable
    assert second.value.error.kind == "Invalid" and not second.value.error.retryable
    for err in (first.value, second.value):
        assert "webhook chat" in str(err) and "s3cr3t" not in str(err) and "127.0.0.1" not in str(err)


async def test_a_hanging_receiver_is_cut_off_at_the_timeout() -> None:
    hang_s, timeout_s = 30.0, 0.5
    with receiver([(200, hang_s)]) as rec:
        hook = WebhookConfig(name="slow", url=rec.url, timeout_s=timeout_s)
        t0 = time.monotonic()
        with pytest.raises(ProviderError) as exc:
            await notify.send(hook, failed())
        waited = time.monotonic() - t0
    assert exc.value.error.kind == "Timeout" and exc.value.error.retryable
    # Cut off at its timeout: not before it, and far short of the receiver's hang.
    assert timeout_s <= waited < hang_s / 3, f"the attempt took {waited:.1f} s for a {timeout_s} s timeout"


async def test_nothing_listening_is_retryable_unavailable() -> None:
    hook = WebhookConfig(name="down", url=closed_port_url())
    with pytest.raises(ProviderError) as exc:
        await notify.send(hook, failed())
    assert exc.value.error.kind == "Unavailable" and exc.value.error.retryable


async def test_a_missing_routing_key_fails_at_once_without_sending() -> None:
    with receiver() as rec:
        hook = WebhookConfig(name="pager", format="pagerduty", url=rec.url, routing_key_env="NO_SUCH_KEY_VAR")
        with pytest.raises(ProviderError) as exc:
            await notify.send(hook, failed(), env={})
    assert exc.value.error.kind == "Invalid" and not exc.value.error.retryable
    assert "NO_SUCH_KEY_VAR is not set" in str(exc.value) and rec.posts == []


@pytest.mark.parametrize(
    ("hook", "message"),
    [
        ({"name": "a", "format": "slack"}, "set url or url_env"),
        ({"name": "a", "url": "http://x", "url_env": "U"}, "set url or url_env, not both"),
        ({"name": "a", "format": "pagerduty"}, "exactly one of routing_key_env or routing_key_file"),
        ({"name": "a", "url": "http://x", "routing_key_env": "K"}, "format pagerduty only"),
        ({"name": "a", "url": "http://x", "events": ["failover.exploded"]}, "Input should be"),
    ],
)
def test_bad_webhook_config_names_the_field(hook: dict[str, object], message: str) -> None:
    text = (Path(__file__).resolve().parents[2] / "config" / "fleet.yaml").read_text()
    import yaml

    data = yaml.safe_load(text)
    data["notifications"] = {"webhooks": [hook]}
    with pytest.raises(ConfigError) as exc:
        parse_config(yaml.safe_dump(data), file="fleet.yaml")
    assert "notifications.webhooks[0]" in str(exc.value) and message in str(exc.value)


def test_duplicate_webhook_names_are_refused() -> None:
    with pytest.raises(ValueError, match="duplicate webhook names: a"):
        NotificationsConfig(
            webhooks=[WebhookConfig(name="a", url="http://x"), WebhookConfig(name="a", url="http://y")]
        )


def test_the_readme_notifications_example_is_valid_config() -> None:
    import yaml

    doc = page("docs/configuration.md")
    block = doc.split("## Notifications", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    cfg = NotificationsConfig.model_validate(yaml.safe_load(block)["notifications"])
    assert [(w.name, w.format) for w in cfg.webhooks] == [("sre-slack", "slack"), ("pagerduty", "pagerduty")]
