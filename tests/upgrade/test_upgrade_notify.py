"""A rolled-back upgrade notifies its webhooks (a real local receiver), with the failing metric."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from drctl.config.schema import FleetConfig, NotificationsConfig, WebhookConfig
from tests.support.receiver import receiver
from tests.support.upgrade import fresh_queues, rolled_back_canary, running_worker

pytestmark = pytest.mark.devstack


async def test_a_rolled_back_upgrade_is_notified(
    fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None
) -> None:
    with receiver() as rec:
        hook = WebhookConfig(name="ops", url=rec.url, events=["upgrade.rolled_back", "failover.started"])
        cfg = fresh_queues(fleet_config).model_copy(
            update={"notifications": NotificationsConfig(webhooks=[hook])}
        )
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
