"""An upgrade whose new replicas load for long, with the monitor automatic (issue 27 item 6).

vLLM keeps its port closed for minutes while it loads weights; the new track's pods sit not ready
in their EndpointSlices meanwhile. The monitor must see capacity coming, not failing replicas: no
DEGRADED region and no failover during the very upgrade that started them, and the rollout waits
out the load (progressDeadlineSeconds + workload.model_load_s) instead of rolling back.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest
from temporalio.client import Client

from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.models.health import ProbeStatus, RegionState
from drctl.models.upgrade import Outcome, Strategy, UpgradeResult
from drctl.providers.probe import InferenceProber
from tests.support.config import tuned
from tests.support.upgrade import fresh_queues, running_worker, stable_container, start_upgrade, upgrade_req
from tests.support.wait import assert_eventually
from tests.support.workers import monitor_handle, monitor_status, until_healthy

pytestmark = [pytest.mark.slow, pytest.mark.devstack]

LOAD_S = 45  # 3 x (probe interval 5 s x failure threshold 3): a monitor counting them failing fails over
REGION = "us-west-1"


async def test_blue_green_with_slow_loading_replicas_succeeds_and_starts_no_failover(
    fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None
) -> None:
    started = datetime.now(UTC)
    cfg = fresh_queues(fleet_config)
    cfg = tuned(cfg, "workload", model_load_s=LOAD_S + 30)  # the rollout wait allows the load
    cfg = tuned(cfg, "health", interval_s=5.0)
    assert cfg.failover.policy == "automatic" and cfg.health.fail_on_degraded
    async with running_worker(temporal_client, cfg):
        mon = await monitor_handle(temporal_client, cfg)
        await until_healthy(mon)
        image = f"vllm/vllm-openai:v0.34.{uuid.uuid4().int % 1000}"
        req = upgrade_req(
            cfg, image, strategy=Strategy.BLUE_GREEN, regions=[REGION], env={"FLEETSIM_LOAD_S": str(LOAD_S)}
        )
        handle = await start_upgrade(temporal_client, cfg, req)
        prober = InferenceProber(cfg)
        seen: list[tuple[ProbeStatus, str]] = []

        async def green_loading() -> bool:
            probe = await prober.probe_region(REGION)
            seen.append((probe.status, probe.reason))
            return any(name.startswith("llm-green-") for name in probe.loading)

        await assert_eventually(green_loading, timeout_s=40, interval_s=1.0, what="green replicas loading")
        # Never DEGRADED while they load: the ready (blue) replicas all serve.
        assert all(status is ProbeStatus.HEALTHY for status, _ in seen), seen
        res = await asyncio.wait_for(result_of(handle, UpgradeResult), timeout=LOAD_S * 3 + 120)
        assert res.outcome is Outcome.SUCCEEDED, res.reason
        assert stable_container(cfg, REGION).image == image
        status = await monitor_status(mon)
        assert all(r.state is RegionState.HEALTHY for r in status.regions.values()), status.regions
        query = f"WorkflowId = 'failover/{cfg.name}' AND StartTime > '{started.isoformat()}'"
        failovers = [ex.id async for ex in temporal_client.list_workflows(query)]
        assert failovers == [], failovers
