"""Upgrade notifications (a real local receiver): a rollback, and the approval gate between regions."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client

from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig, WebhookConfig
from drctl.models.phases import ApproveInput
from drctl.models.upgrade import Outcome, UpgradeResult
from tests.support.receiver import receiver, with_hooks
from tests.support.upgrade import (
    fresh_queues,
    rolled_back_canary,
    running_worker,
    start_upgrade,
    upgrade_req,
)
from tests.support.wait import assert_eventually

pytestmark = pytest.mark.devstack


async def test_a_rolled_back_upgrade_is_notified(
    fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None
) -> None:
    with receiver() as rec:
        hook = WebhookConfig(name="ops", url=rec.url, events=["upgrade.rolled_back", "failover.started"])
        cfg = with_hooks(fresh_queues(fleet_config), hook)
        async with running_worker(temporal_client, cfg):
            errors = {"FLEETSIM_ERROR_RATE": "0.6"}
            req, _ = await rolled_back_canary(
                temporal_client, cfg, "vllm/vllm-openai:v0.8.0-bad", "us-west-1", errors, [25, 100]
            )

            await rec.posted(what="the rollback notification")
    [body] = rec.bodies()
    assert body["kind"] == "upgrade.rolled_back" and body["severity"] == "warning"
    assert body["details"]["failed_metric"] == "error_rate" and body["details"]["region"] == "us-west-1"
    assert body["workflow_id"] == f"upgrade/{cfg.name}/{req.upgrade_id}"


async def test_an_upgrade_waiting_between_regions_sends_the_approval_notice_and_reminder(
    fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None
) -> None:
    gate = {"approval_timeout_s": 30.0, "approval_reminder_s": 28.0}  # the reminder is due 2 s in
    with receiver() as rec:
        hook = WebhookConfig(name="approvers", url=rec.url, events=["approval.pending"])
        base = fresh_queues(fleet_config)
        cfg = with_hooks(base.model_copy(update={"failover": base.failover.model_copy(update=gate)}), hook)
        async with running_worker(temporal_client, cfg):
            req = upgrade_req(cfg, "vllm/vllm-openai:v0.8.1", steps_percent=[100])
            req = req.model_copy(update={"approval_between_regions": True})
            handle = await start_upgrade(temporal_client, cfg, req)

            async def reminded() -> bool:
                return len(rec.bodies()) >= 2

            await assert_eventually(reminded, timeout_s=120, what="the approval notice and its reminder")
            # Not a failover: the initiator may approve an upgrade's next region.
            await handle.execute_update(
                "approve", ApproveInput(approver=temporal_client.identity), result_type=str
            )
            res = await asyncio.wait_for(result_of(handle, UpgradeResult), 180)
    assert res.outcome is Outcome.SUCCEEDED, res
    notice, reminder = rec.bodies()[:2]
    assert (notice["kind"], reminder["kind"]) == ("approval.pending", "approval.pending")
    assert notice["details"]["operation"] == "upgrade to vllm/vllm-openai:v0.8.1 before us-east-1"
    assert notice["details"]["initiator"] == temporal_client.identity
    assert (notice["details"]["left_s"], reminder["details"]["left_s"]) == (30.0, 28.0)
    assert (notice["details"]["reminder"], reminder["details"]["reminder"]) == (False, True)
