"""A rollback whose platform calls fail is reported as ROLLBACK_FAILED, naming what is left behind.

The worker reaches us-west-1's cluster through a loopback fault proxy that refuses to delete the
canary Deployment (403, as RBAC without `delete deployments` answers). Everything else is the real
dev stack: the bad canary fails analysis, traffic returns to stable, and the rollback's last step
cannot remove the canary.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from rich.console import Console
from temporalio.client import Client

from drctl.cli.upgrade import render
from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.models.upgrade import Outcome, UpgradeResult, upgrade_request
from drctl.providers.haproxy_runtime import HAProxyRuntime
from tests.support.config import tuned
from tests.support.devstack import apps_api
from tests.support.fault_proxy import Fault, KubeFaultProxy, serve
from tests.support.ports import free_port
from tests.support.upgrade import fresh_queues, running_worker, start_upgrade

pytestmark = pytest.mark.devstack

REGION = "us-west-1"


def _through_proxy(cfg: FleetConfig, url: str) -> FleetConfig:
    regions = [tuned(r, "kube", api_url=url) if r.name == REGION else r for r in cfg.regions]
    return cfg.model_copy(update={"regions": regions})


@pytest.fixture
async def proxied(
    fleet_config: FleetConfig, reset_fleet: None
) -> AsyncIterator[tuple[FleetConfig, KubeFaultProxy]]:
    proxy = KubeFaultProxy(fleet_config.region(REGION).kube.api_url or "")
    port = free_port()
    runner = await serve(proxy, port)
    try:
        yield fresh_queues(_through_proxy(fleet_config, f"http://127.0.0.1:{port}")), proxy
    finally:
        await runner.cleanup()


async def test_failed_rollback_is_reported_as_rollback_failed(
    proxied: tuple[FleetConfig, KubeFaultProxy], fleet_config: FleetConfig, temporal_client: Client
) -> None:
    cfg, proxy = proxied
    denied = proxy.add(
        Fault(
            "DELETE",
            r".*/deployments/llm-canary",
            status=403,
            message=(
                'deployments.apps "llm-canary" is forbidden: User "system:serviceaccount:drctl:drctl" cannot delete '
                'resource "deployments" in API group "apps" in the namespace "inference"'
            ),
        )
    )
    ns = fleet_config.region(REGION).kube.namespace
    before = (
        apps_api(fleet_config.region(REGION).kube.api_url or "")
        .read_namespaced_deployment("llm-stable", ns)
        .spec.template.spec.containers[0]
        .image
    )
    image = f"vllm/vllm-openai:v0.9.{uuid.uuid4().int % 1000}-bad"
    req: Any = upgrade_request(
        cfg,
        uuid.uuid4().hex[:8],
        image,
        steps_percent=[25, 100],
        regions=[REGION],
        env={"FLEETSIM_ERROR_RATE": "0.6"},
    )
    req = req.model_copy(
        update={
            "step_pause_s": 1.0,
            "scale_down_delay_s": 1.0,
            "limits": req.limits.model_copy(update={"min_samples": 8}),
        }
    )
    async with running_worker(temporal_client, cfg):
        handle = await start_upgrade(temporal_client, cfg, req)
        res = await asyncio.wait_for(result_of(handle, UpgradeResult), timeout=180)

    assert res.outcome is Outcome.ROLLBACK_FAILED, res
    assert denied.hits >= 1
    assert res.failed_region == REGION
    [release] = res.releases
    assert (release.region, release.image, release.state) == (REGION, before, "rollback-failed")
    # It names the object left behind, the release it runs, and the permission that was missing.
    [left] = release.left_behind
    assert "llm-canary" in left and image in left and "Forbidden" in left and "cannot delete" in left
    assert "rollback failed" in res.reason and "llm-canary" in res.reason
    wave = res.waves[0]
    assert wave.outcome is Outcome.ROLLBACK_FAILED and wave.left_behind == [left]
    # What the result claims is what the cluster shows: the canary is still there, traffic is on stable.
    deployments = {
        d.metadata.name
        for d in apps_api(fleet_config.region(REGION).kube.api_url or "").list_namespaced_deployment(ns).items
    }
    assert "llm-canary" in deployments
    weights = HAProxyRuntime(fleet_config.region(REGION).gateway_runtime_socket or "").get_weights("region")
    assert weights["stable"] == 100 and weights["canary"] == 0
    console = Console(width=300, record=True)
    render(res, "http://ui/x", console)
    text = console.export_text()
    assert (
        "upgrade: ROLLBACK_FAILED" in text and f"left behind {REGION}" in text and "rolled-back" not in text
    )
