"""A drill's verdict reaches its webhooks: here PagerDuty, which pages for a drill that did not pass."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from drctl.config.schema import FleetConfig
from drctl.models.drill import Verdict
from tests.support.drills import EXPERIMENTS, run_drill
from tests.support.receiver import pagerduty_hook, receiver, with_hooks
from tests.support.workers import StartWorkers, admin, fast_config

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


async def test_an_aborted_drill_triggers_a_pagerduty_incident(
    start_workers: StartWorkers,
    temporal_client: Client,
    fleet_config: FleetConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with receiver() as rec:
        hook = pagerduty_hook(monkeypatch, rec.url, "drill-key")
        base = fast_config(fleet_config)
        cfg = await start_workers(cfg=with_hooks(base, hook))
        admin(
            cfg, "us-east-1", "/faults/inference", {"error_rate": 1.0}
        )  # preflight refuses: nothing injected
        report = await run_drill(temporal_client, cfg, EXPERIMENTS / "region-outage.json")
        assert report.verdict is Verdict.ABORTED, report

        await rec.posted(what="the PagerDuty event")
    [body] = rec.bodies()
    assert body["routing_key"] == "drill-key" and body["event_action"] == "trigger"
    assert body["dedup_key"] == f"drctl/{cfg.name}/drill"
    assert body["payload"]["severity"] == "error" and body["payload"]["class"] == "drill.verdict"
    assert body["payload"]["summary"].startswith(f"[{cfg.name}] drill region-outage on us-west-1: ABORTED")
    assert body["payload"]["custom_details"]["workflow_id"] == report.id
