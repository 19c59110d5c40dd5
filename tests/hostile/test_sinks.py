"""Hostile text reaches no sink raw: webhooks, log lines and the Temporal UI (issue 28, class 2).

Each sink is read where its reader reads it: the webhook body as a loopback receiver decoded it, the
worker's log output as its handler wrote it, the workflow's current details as the UI queries them and
the summaries as the history holds them. In each, no ESC, C1, NUL, bidi override or newline arrives
raw, no link, mention or HTML survives the format's markup, and every value is bounded.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities import notify as notify_activities
from activities.errors import FAILURE_CHARS, app_error
from drctl.client import operations
from drctl.config.schema import WebhookConfig, load_config
from drctl.models.activity_io import Weights
from drctl.models.fleet_spec import FleetSpec
from drctl.models.notify import Event
from drctl.models.safe_text import SUMMARY_CHARS, safe_markdown, safe_slack, safe_text
from drctl.providers import notify
from drctl.providers.errors import ErrorClass, ProviderError
from drctl.worker import logs
from tests.hostile.sink_cases import CASES, COMBINED, assert_shown_safely, json_line, strings
from tests.hostile.sink_workflow import HostileSinks, SinkInput
from tests.support.config import write_fleet_config
from tests.support.receiver import pagerduty_hook, receiver
from workflows.common import DETAIL_CHARS
from workflows.notify import Notify

AT = datetime(2026, 12, 2, 16, 0, tzinfo=UTC)
ALL = {**CASES, "all at once": COMBINED}
# What a Slack client would turn into a link, a mention or a ping, as the hostile text writes it
# (the renderer's own link to the Temporal UI is <http://127.0.0.1...|id>).
SLACK_ACTIVE = ("<!", "<@", "<http://evil", "@channel", "@here", "@everyone")


def _event(text: str) -> Event:
    return Event(
        kind="failover.failed",
        fleet="demo",
        summary=f"[demo] failover to us-east-1 failed: {text}",
        severity="error",
        action="trigger",
        dedup_key="drctl/demo/failover",
        workflow_id="failover/demo",
        region="us-east-1",
        at=AT,
        details={"error": text, "rto_s": 4.2},
    )


# --- the escapers themselves ----------------------------------------------------------------------


def test_each_format_escapes_what_its_reader_would_act_on() -> None:
    assert safe_text("a" * 50, limit=30) == "a" * 8 + "… (cut, 50 characters)"  # 30 in all
    assert safe_markdown("[x](http://e) <b> a|b &#x202e;") == r"\[x\](http://e) \<b\> a\|b \&#x202e;"
    assert safe_markdown("# done") == r"\# done" and safe_markdown("1. step") == r"1\. step"
    assert safe_markdown("\x1b[2J") == r"\\x1b\[2J"  # renders as the visible escape \x1b[2J
    assert safe_slack("<!channel> @here a&b") == "&lt;!channel&gt; \uff20here a&amp;b"
    for text in ("us-east-1", "llm-stable", "4.2 s", ""):  # ordinary values pass unchanged
        assert safe_markdown(text) == safe_slack(text) == text


# --- webhooks -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["json", "slack", "pagerduty"])
@pytest.mark.parametrize("text", ALL.values(), ids=list(ALL))
async def test_a_webhook_receives_hostile_text_escaped_and_bounded(
    fmt: str, text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver() as rec:
        if fmt == "pagerduty":
            hook = pagerduty_hook(monkeypatch, rec.url + "/hook", "key")
        else:
            hook = WebhookConfig(name="ops", format=fmt, url=rec.url + "/hook")
        await notify.send(hook, _event(text))
        [body] = rec.bodies("/hook")
    for s in strings(body):
        # A Slack field is the renderer's "*name*\nvalue": that one newline is its own.
        own = s.split("\n", 1) if fmt == "slack" and s.startswith("*") else [s]
        for part in own:
            assert_shown_safely(part, 3000, f"{fmt} webhook")
    if fmt == "slack":
        mrkdwn = [
            o for b in body["blocks"] for o in (b.get("fields") or [b.get("text")] + b.get("elements", []))
        ]
        assert mrkdwn and all(o["verbatim"] for o in mrkdwn if o), mrkdwn
        for s in strings(body):
            assert not any(a in s for a in SLACK_ACTIVE), s[:300]
        # Slack refuses a field over 2000 characters (invalid_blocks); a section's text may hold 3000.
        assert all(len(f["text"]) <= 2000 for b in body["blocks"] for f in b.get("fields", []))
    elif fmt == "json":
        assert body["summary"].startswith("[demo] failover to us-east-1 failed: ")
        assert len(body["details"]["error"]) <= 2000 and body["details"]["rto_s"] == 4.2
    else:
        assert len(body["payload"]["summary"]) <= 1024
    if "\x1b[2J" in text and fmt != "slack":
        assert "\\x1b[2J" in json.dumps(body["summary"] if fmt == "json" else body["payload"]["summary"])


# --- log lines ------------------------------------------------------------------------------------


@pytest.fixture
def worker_log() -> Iterator[Callable[[str], io.StringIO]]:
    """Sets the worker's logging up as `drctl worker` does, into a buffer; restored afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, activity.logger.activity_info_on_message)
    saved_wf = workflow.logger.workflow_info_on_message
    cfg = load_config(write_fleet_config())

    def setup(fmt: str) -> io.StringIO:
        buf = io.StringIO()
        logs.setup(fmt, cfg, None, stream=buf)
        return buf

    try:
        yield setup
    finally:
        root.handlers[:], root.level, activity.logger.activity_info_on_message = saved
        workflow.logger.workflow_info_on_message = saved_wf


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_log_line_quoting_hostile_text_is_one_escaped_bounded_line(
    fmt: str, worker_log: Callable[[str], io.StringIO]
) -> None:
    buf = worker_log(fmt)
    log = logging.getLogger("activities.probe")
    for name, text in ALL.items():
        buf.seek(0)
        buf.truncate()
        log.warning("probe of %s failed: %s", "us-east-1", text)
        [line] = buf.getvalue().splitlines()  # one record, one line: nothing forged after it
        message = json_line(line)["message"] if fmt == "json" else line
        assert_shown_safely(message, logs.MESSAGE_CHARS + 200, f"{fmt} log, {name}")
    buf.seek(0)
    buf.truncate()
    try:
        raise RuntimeError(COMBINED)
    except RuntimeError:
        log.exception("call failed")
    out = buf.getvalue()
    lines = [json_line(out)["exception"]] if fmt == "json" else out.splitlines()
    for line in (x for chunk in lines for x in chunk.splitlines()):
        assert_shown_safely(line, logs.TRACEBACK_CHARS, f"{fmt} log traceback")
    assert "\\x1b[2J" in out


# --- the Temporal UI ------------------------------------------------------------------------------


@activity.defn(name="get_global_weights")
async def _weights() -> Weights:
    return Weights(weights={"us-west-1": 100})


async def test_the_temporal_ui_shows_hostile_text_escaped_and_bounded(
    temporal_env: WorkflowEnvironment,
) -> None:
    client = temporal_env.client
    queue = f"hostile-{uuid.uuid4().hex[:8]}"
    with receiver() as rec:
        hook = {"name": "chat", "format": "slack", "url": rec.url + "/slack", "events": ["failover.started"]}
        cfg = load_config(write_fleet_config(overrides={"notifications": {"webhooks": [hook]}}))
        spec = FleetSpec.from_config(cfg).model_copy(update={"task_queue": queue})
        async with Worker(
            client,
            task_queue=queue,
            workflows=[HostileSinks, Notify],
            activities=[_weights, *notify_activities.build(cfg)],
        ):
            handle = await client.start_workflow(
                HostileSinks.run, SinkInput(text=COMBINED, spec=spec), id=f"hostile/{queue}", task_queue=queue
            )
            await asyncio.wait_for(handle.result(), 60)
            meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
            [slack] = await rec.posted(1, timeout_s=30, what="the Slack notification")
        summaries: dict[str, str] = {}
        async for e in handle.fetch_history_events():
            if e.event_type in (
                EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
                EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
            ):
                summaries[EventType.Name(e.event_type)] = json.loads(e.user_metadata.summary.data)
    details = meta.current_details
    # The renderer's own lines only: each holds at most a fact's two values, and no raw control.
    for line in details.split("\n"):
        assert_shown_safely(line, 2 * DETAIL_CHARS + 20, "current details")
    assert len(details) < 5 * DETAIL_CHARS
    for raw in ("[open the runbook](", " <img", " &#x202e;", "\n# FAILOVER"):
        assert raw not in details, raw
    assert r"\<img" in details
    assert r"\[open the runbook\]" in details and r"\\x1b\[2J" in details
    assert set(summaries) == {
        "EVENT_TYPE_ACTIVITY_TASK_SCHEDULED",
        "EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED",
    }
    for where, summary in summaries.items():
        assert_shown_safely(summary, SUMMARY_CHARS, where)
    assert summaries["EVENT_TYPE_ACTIVITY_TASK_SCHEDULED"].startswith(
        "read weights for probe failed \\x1b[2J"
    )
    for s in strings(slack):
        for part in s.split("\n", 1) if s.startswith("*") else [s]:
            assert_shown_safely(part, 3000, "Slack body")
        assert not any(a in s for a in SLACK_ACTIVE), s[:300]


def test_an_operation_started_from_the_cli_shows_its_initiator_escaped() -> None:
    # The initiator is whatever the caller says (--initiator, the client identity): the UI lists it.
    line = operations.summary("failover", "demo", COMBINED, "us-west-1", "us-east-1")
    assert_shown_safely(line, SUMMARY_CHARS, "static summary")
    assert line.startswith("failover of fleet demo (us-west-1 → us-east-1) by probe failed \\x1b[2J")


def test_an_activity_failure_quoting_hostile_text_is_one_escaped_bounded_line() -> None:
    # What the UI's failure view, the history and a workflow's own reasons then quote.
    exc = ProviderError(ErrorClass(kind="Invalid", retryable=False, message=f"deployment llm: {COMBINED}"))
    err = app_error(exc)
    assert_shown_safely(err.message, FAILURE_CHARS, "activity failure")
    assert err.message.startswith("deployment llm: probe failed \\x1b[2J") and err.non_retryable
