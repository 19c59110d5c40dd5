"""Webhook delivery: render an Event per format (generic JSON, Slack, PagerDuty Events v2) and POST it.

Secrets (a Slack URL, a PagerDuty routing key) are read here, at send time, from the environment
or a file named in the config; they never enter workflow input, history or error messages.
Errors are classified through the one error table, but their messages name the webhook, never
the URL, because an activity's failure message is stored in history.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

import httpx

from drctl.config.bounded_read import read_regular_text
from drctl.config.schema import PAGERDUTY_EVENTS_URL, WebhookConfig
from drctl.models.notify import Detail, Event
from drctl.models.safe_text import safe_slack, safe_text
from drctl.providers.auth import MAX_TOKEN_BYTES
from drctl.providers.errors import ErrorClass, ProviderError, classify

# Slack refuses a section with more than 10 fields or a field over 2000 characters (invalid_blocks),
# so cut to fit; the generic JSON format keeps everything.
_SLACK_FIELDS = 10
_SLACK_FIELD_CHARS = 1900
_SLACK_TEXT_CHARS = 2900
# A summary or detail quotes reasons a server wrote and names a config holds: each is escaped and cut
# to this before any receiver sees it, whatever the format (drctl/models/safe_text.py).
_TEXT_CHARS = 2000
_KEY_CHARS = 100
_EMOJI = {
    "critical": ":rotating_light:",
    "error": ":x:",
    "warning": ":warning:",
    "info": ":white_check_mark:",
}


def _detail(value: Detail) -> Detail:
    return safe_text(value, limit=_TEXT_CHARS) if isinstance(value, str) else value


def shown(event: Event) -> Event:
    """`event` with its free text escaped, one line each, and bounded: what a receiver may see."""
    return event.model_copy(
        update={
            "summary": safe_text(event.summary, limit=_TEXT_CHARS),
            "region": None if event.region is None else safe_text(event.region, limit=_KEY_CHARS),
            "details": {safe_text(k, limit=_KEY_CHARS): _detail(v) for k, v in event.details.items()},
        }
    )


def render_json(event: Event, link: str | None) -> dict[str, Any]:
    return {"version": 1, "source": "drctl", **shown(event).model_dump(mode="json"), "link": link}


def _mrkdwn(text: str) -> dict[str, Any]:
    # verbatim: Slack links no URL, channel name or mention it finds in the text by itself.
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def render_slack(event: Event, link: str | None) -> dict[str, Any]:
    """An incoming-webhook message: `text` is the notification fallback, `blocks` the rich view.

    Every value is Slack-escaped (no `<...>` link or mention, no broadcast) before the message's own
    markup is put around it."""
    text = f"{_EMOJI[event.severity]} {safe_slack(event.summary, limit=_SLACK_TEXT_CHARS - 30)}"
    fields = [
        _mrkdwn(f"*{safe_slack(k, limit=_KEY_CHARS)}*\n{safe_slack(v, limit=_SLACK_FIELD_CHARS - 110)}")
        for k, v in event.details.items()
        if v not in (None, "")
    ]
    blocks: list[dict[str, Any]] = [{"type": "section", "text": _mrkdwn(text)}]
    if fields:
        blocks.append({"type": "section", "fields": fields[:_SLACK_FIELDS]})
    context = f"`{safe_slack(event.kind)}` · fleet `{safe_slack(event.fleet)}` · {event.at.isoformat()}"
    if link:
        context += f" · <{link}|{safe_slack(event.workflow_id)}>"
    blocks.append({"type": "context", "elements": [_mrkdwn(context)]})
    return {"text": text, "blocks": blocks}


def render_pagerduty(event: Event, link: str | None, routing_key: str) -> dict[str, Any]:
    """An Events API v2 trigger or resolve; the dedup_key ties a resolve to its trigger."""
    if event.action is None:
        raise ValueError(f"event {event.kind} is not a PagerDuty incident event")
    event = shown(event)
    body: dict[str, Any] = {
        "routing_key": routing_key,
        "event_action": event.action,
        "dedup_key": event.dedup_key,
    }
    if event.action == "trigger":
        # PagerDuty caps the summary at 1024 characters and rejects the event beyond that.
        body["payload"] = {
            "summary": event.summary[:1024],
            "severity": event.severity,
            "source": f"drctl/{event.fleet}",
            "timestamp": event.at.isoformat(),
            "component": event.region or event.fleet,
            "group": event.fleet,
            "class": event.kind,
            "custom_details": {**event.details, "workflow_id": event.workflow_id},
        }
        body["client"] = "drctl"
        if link:
            body["client_url"] = link
            body["links"] = [{"href": link, "text": f"Temporal: {event.workflow_id}"}]
    return body


def _secret(
    hook: WebhookConfig, env_name: str | None, file: str | None, what: str, env: Mapping[str, str]
) -> str:
    if env_name:
        value = env.get(env_name, "").strip()
        if not value:
            raise _invalid(hook, f"{what}: environment variable {env_name} is not set")
        return value
    if file:
        try:
            value = read_regular_text(file, max_bytes=MAX_TOKEN_BYTES, what=what).strip()
        except OSError as exc:  # FileRefused too: a FIFO or device is refused before it is opened
            raise _invalid(hook, f"{what}: cannot read {file}: {exc.strerror}") from None
        if not value:
            raise _invalid(hook, f"{what}: {file} is empty")
        return value
    raise _invalid(hook, f"no {what} configured")


def _invalid(hook: WebhookConfig, message: str) -> ProviderError:
    # A missing secret does not appear by retrying: fail at once so the operator sees it.
    return ProviderError(
        ErrorClass(kind="Invalid", retryable=False, message=f"webhook {hook.name}: {message}")
    )


def render(
    hook: WebhookConfig, event: Event, link: str | None, env: Mapping[str, str] | None = None
) -> tuple[str, dict[str, Any]]:
    """The URL and JSON body for one webhook, with its secrets resolved."""
    env = os.environ if env is None else env
    url = hook.url or (_secret(hook, hook.url_env, None, "url", env) if hook.url_env else None)
    if hook.format == "pagerduty":
        key = _secret(hook, hook.routing_key_env, hook.routing_key_file, "routing key", env)
        return url or PAGERDUTY_EVENTS_URL, render_pagerduty(event, link, key)
    if url is None:  # the config validator prevents this; a config built in code may not
        raise _invalid(hook, "no url or url_env configured")
    return url, render_slack(event, link) if hook.format == "slack" else render_json(event, link)


async def send(
    hook: WebhookConfig, event: Event, link: str | None = None, env: Mapping[str, str] | None = None
) -> int:
    """POST one event; returns the HTTP status. Raises ProviderError, classified, naming the webhook only."""
    url, body = render(hook, event, link, env)
    try:
        # httpx's timeout bounds each read, not the whole call: a receiver trickling bytes would
        # outlast it. The outer deadline bounds the attempt as configured.
        async with asyncio.timeout(hook.timeout_s):
            async with httpx.AsyncClient(timeout=hook.timeout_s, follow_redirects=False) as client:
                resp = await client.post(url, json=body, headers={"User-Agent": "drctl"})
                resp.raise_for_status()
                return resp.status_code
    except TimeoutError:
        raise ProviderError(
            ErrorClass(
                kind="Timeout",
                retryable=True,
                message=f"Timeout: webhook {hook.name} ({hook.format}): no answer "
                f"within {hook.timeout_s:g} s",
            )
        ) from None
    except httpx.HTTPError as exc:
        err = classify(exc)
        where = (
            f"HTTP {exc.response.status_code}"
            if isinstance(exc, httpx.HTTPStatusError)
            else type(exc).__name__
        )
        raise ProviderError(
            ErrorClass(
                kind=err.kind,
                retryable=err.retryable,
                message=f"{err.kind}: webhook {hook.name} ({hook.format}): {where}",
            )
        ) from None
