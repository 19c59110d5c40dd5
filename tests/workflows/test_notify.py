"""Notifications through real workers and the session dev stack, received by a local HTTP server."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle

from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig, WebhookConfig
from drctl.models import notify as ev
from drctl.models.failover import FailoverResult
from drctl.models.notify import NotifyInput, NotifyResult, WebhookSpec
from tests.support.builders import failover_ended_event
from tests.support.cli import cli, drctl
from tests.support.config import tuned, write_config
from tests.support.receiver import Receiver, closed_port_url, pagerduty_hook, receiver, with_hooks
from tests.support.wait import assert_eventually
from tests.support.workers import StartWorkers, fast_config, kill_stable, start_failover, weights
from workflows.notify import Notify

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


def an_event(cfg: FleetConfig) -> ev.Event:
    return failover_ended_event(
        cfg.name, f"failover/{cfg.name}", datetime.now(UTC), status="failed", error="test"
    )


async def run_notify(client: Client, cfg: FleetConfig, hook: WebhookConfig) -> NotifyResult:
    inp = NotifyInput(event=an_event(cfg), webhooks=[WebhookSpec.from_config(hook)])
    return await client.execute_workflow(
        Notify.run,
        inp,
        id=f"notify-test/{uuid.uuid4().hex[:8]}",
        task_queue=cfg.temporal.task_queue,
        result_type=NotifyResult,
    )


async def test_delivery_is_retried_with_backoff_until_the_receiver_accepts(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig
) -> None:
    with receiver([(500, 0), (503, 0)]) as rec:
        hook = WebhookConfig(name="ops", url=rec.url + "/hook", retry_for_s=60)
        cfg = await start_workers(cfg=with_hooks(fast_config(fleet_config), hook))
        res = await asyncio.wait_for(run_notify(temporal_client, cfg, hook), 60)
    assert res.delivered == ["ops"] and res.failed == {}
    assert [p.status for p in rec.posts] == [500, 503, 200]
    assert rec.posts[2].at - rec.posts[1].at > rec.posts[1].at - rec.posts[0].at  # the backoff grows


async def test_delivery_gives_up_after_retry_for_s_and_ends_failed(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig
) -> None:
    hook = WebhookConfig(name="down", url=closed_port_url(), timeout_s=1, retry_for_s=4)
    cfg = await start_workers(cfg=with_hooks(fast_config(fleet_config), hook))
    with pytest.raises(WorkflowFailureError) as exc:
        await asyncio.wait_for(run_notify(temporal_client, cfg, hook), 60)
    assert "not delivered to: down" in str(exc.value.cause)


async def _children(handle: WorkflowHandle[Any, Any]) -> list[str]:
    ids = []
    async for e in handle.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            assert e.activity_task_scheduled_event_attributes.activity_type.name != "notify_webhook"
        if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            ids.append(e.start_child_workflow_execution_initiated_event_attributes.workflow_id)
    return ids


async def _failover(client: Client, cfg: FleetConfig) -> tuple[FailoverResult, WorkflowHandle[Any, Any]]:
    handle = await start_failover(client, cfg)
    return await asyncio.wait_for(result_of(handle, FailoverResult), 120), handle


async def test_a_failover_notifies_started_and_succeeded(
    start_workers: StartWorkers,
    temporal_client: Client,
    fleet_config: FleetConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with receiver() as rec:
        cfg = await start_workers(
            cfg=with_hooks(
                fast_config(fleet_config),
                WebhookConfig(name="ops", url=rec.url + "/json"),
                pagerduty_hook(monkeypatch, rec.url + "/pd", "test-routing-key"),
            )
        )
        res, handle = await _failover(temporal_client, cfg)
        assert res.status == "succeeded", res.error
        await assert_eventually(lambda: _got(rec, "/json", 2), timeout_s=30, what="two JSON notifications")
        await assert_eventually(lambda: _got(rec, "/pd", 1), timeout_s=30, what="the PagerDuty resolve")
    started, done = rec.bodies("/json")
    assert (started["kind"], done["kind"]) == ("failover.started", "failover.succeeded")
    assert done["workflow_id"] == f"failover/{cfg.name}" and done["details"]["rto_s"] == res.rto_s
    assert done["link"].endswith(f"/workflows/failover%2F{cfg.name}/{handle.result_run_id}")
    [pd] = rec.bodies("/pd")  # "started" is no incident: PagerDuty only hears the resolve
    assert pd == {
        "routing_key": "test-routing-key",
        "event_action": "resolve",
        "dedup_key": f"drctl/{cfg.name}/failover",
    }
    # The routing key and URLs stay out of history: the workflow knows webhooks by name only.
    history = (await handle.fetch_history()).to_json()
    assert "test-routing-key" not in history and rec.url not in history
    assert len(await _children(handle)) == 2


async def test_a_receiver_that_hangs_neither_fails_nor_holds_the_failover(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig
) -> None:
    with receiver([(200, 60.0)] * 10) as rec:
        hook = WebhookConfig(name="stuck", url=rec.url, timeout_s=20, retry_for_s=120)
        cfg = await start_workers(cfg=with_hooks(fast_config(fleet_config), hook))
        res, handle = await _failover(temporal_client, cfg)
        assert res.status == "succeeded", res.error
        assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
        children = [temporal_client.get_workflow_handle(c) for c in await _children(handle)]
        # The failover returned while its notifications are still stuck in delivery: it never waited.
        statuses = [(await c.describe()).status for c in children]
        assert statuses == [WorkflowExecutionStatus.RUNNING] * 2
        assert len(rec.posts) >= 1
        for c in children:
            await c.terminate("test done")


async def _got(rec: Receiver, path: str, n: int) -> bool:
    return len(rec.bodies(path)) >= n


async def test_all_regions_unhealthy_raises_then_resolves_the_alert(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig
) -> None:
    from drctl.cli.monitor import start_monitor
    from drctl.models.monitor import ALL_REGIONS_UNHEALTHY
    from tests.support.workers import admin

    with receiver() as rec:
        base = fast_config(fleet_config)
        manual = tuned(base, "failover", policy="manual")
        cfg = await start_workers(
            cfg=with_hooks(
                manual,
                WebhookConfig(
                    name="chat",
                    format="slack",
                    url=rec.url + "/slack",
                    events=["alert.raised", "alert.resolved"],
                ),
            )
        )
        await start_monitor(temporal_client, cfg)
        for region in cfg.region_names:
            kill_stable(cfg, region)
        await assert_eventually(
            lambda: _got(rec, "/slack", 1), timeout_s=60, interval_s=0.3, what="alert raised"
        )
        for region in cfg.region_names:
            admin(cfg, region, "/faults/clear")
        await assert_eventually(
            lambda: _got(rec, "/slack", 2), timeout_s=90, interval_s=0.3, what="alert resolved"
        )
    raised, resolved = (b["text"] for b in rec.bodies("/slack")[:2])
    assert (
        raised.startswith(f":rotating_light: [{cfg.name}] {ALL_REGIONS_UNHEALTHY}: us-west-1 ")
        and "UNHEALTHY" in raised
    )
    assert resolved.startswith(f":white_check_mark: [{cfg.name}] {ALL_REGIONS_UNHEALTHY} resolved")


async def test_cli_notify_test_goes_through_the_worker_and_reports_each_webhook(
    start_workers: StartWorkers, fleet_config: FleetConfig, fleet_config_path: Path
) -> None:
    with receiver() as good, receiver([(400, 0)]) as bad:
        cfg = await start_workers(
            cfg=with_hooks(
                fast_config(fleet_config),
                WebhookConfig(name="ops", url=good.url),
                WebhookConfig(name="broken", url=bad.url),
            )
        )
        path = write_config(cfg, fleet_config_path.parent)
        one = await asyncio.to_thread(drctl, "notify", "test", "--webhook", "ops", "-c", str(path))
        both = await asyncio.to_thread(drctl, "notify", "test", "-c", str(path))
    assert one.returncode == 0, one.stdout + one.stderr
    assert "delivered ops" in one.stdout and f"/workflows/notify%2F{cfg.name}" in one.stderr
    assert both.returncode == 1, both.stdout + both.stderr
    assert (
        "delivered ops" in both.stdout
        and "failed    broken: Invalid: webhook broken (json): HTTP 400" in both.stdout
    )
    assert [b["kind"] for b in good.bodies()] == ["notify.test", "notify.test"] and len(bad.posts) == 1
    unknown = await asyncio.to_thread(drctl, "notify", "test", "--webhook", "nope", "-c", str(path))
    assert unknown.returncode == 2 and "unknown webhook nope; configured: ops, broken" in unknown.stderr


async def test_no_interested_webhook_schedules_nothing(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig
) -> None:
    with receiver() as rec:
        hook = WebhookConfig(name="drills-only", url=rec.url, events=["drill.verdict"])
        cfg = await start_workers(cfg=with_hooks(fast_config(fleet_config), hook))
        res, handle = await _failover(temporal_client, cfg)
    assert res.status == "succeeded", res.error
    assert await _children(handle) == [] and rec.posts == []  # no command, no history event, no POST


async def test_a_pending_approval_notifies_then_reminds_before_the_timeout_and_a_reject_ends_it(
    start_workers: StartWorkers,
    temporal_client: Client,
    fleet_config: FleetConfig,
    fleet_config_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = fast_config(fleet_config)
    # A 30 s gate that reminds 27 s before it times out: the reminder is due 3 s in.
    gate = {"require_approval": True, "approval_timeout_s": 30.0, "approval_reminder_s": 27.0}
    gated = base.model_copy(update={"failover": base.failover.model_copy(update=gate)})
    with receiver() as rec:
        hook = WebhookConfig(
            name="approvers", format="slack", url=rec.url + "/slack", events=["approval.pending"]
        )
        cfg = await start_workers(cfg=with_hooks(gated, hook))
        path = write_config(cfg, fleet_config_path.parent)
        wid = f"failover/{cfg.name}"
        handle = await start_failover(temporal_client, cfg)
        await assert_eventually(
            lambda: _got(rec, "/slack", 2),
            timeout_s=45,
            interval_s=0.3,
            what="the approval notice and reminder",
        )
        monkeypatch.setenv("DRCTL_IDENTITY", "carol@example.com")
        code, out, err = await cli("ops", "reject", wid, "--reason", "not during the launch", "-c", str(path))
        assert code == 0 and "rejected by carol@example.com" in out, (out, err)
        res = await asyncio.wait_for(result_of(handle, FailoverResult), 60)
    assert res.status == "aborted" and res.rejected_by == "carol@example.com" and res.approved_by is None
    assert res.error == "rejected by carol@example.com: not during the launch"
    assert weights(cfg) == cfg.weights  # rejected at the gate: nothing moved
    first, again = rec.posts[:2]
    assert len(rec.posts) == 2  # nothing more after the answer
    # The reminder came 3 s after the notice, well before the 30 s timeout (one second either way).
    assert 2.0 <= again.at - first.at <= 10.0, again.at - first.at
    by = temporal_client.identity  # start_failover starts it as the test's client
    notice, reminder = first.body["text"], again.body["text"]
    assert f"failover to us-east-1 started by {by} waits for approval, 30 s left" in notice
    assert f"`drctl ops approve {wid}` (another identity)" in notice and f"`drctl ops reject {wid}`" in notice
    assert "reminder: failover to us-east-1" in reminder and "27 s left" in reminder
    code, out, err = await cli("ops", "show", wid, "-o", "json", "-c", str(path))
    shown = json.loads(out)
    assert shown["initiator"] == by and shown["result"]["rejected_by"] == "carol@example.com", shown
    # An approval after the end: refused in one line, exit 2.
    code, out, err = await cli("ops", "approve", wid, "-c", str(path))
    assert code == 2 and err.startswith(f"error: approve failed for {wid}: "), (out, err)
