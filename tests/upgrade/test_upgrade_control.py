"""Upgrade control on the dev stack: the backup gate, abort mid-canary, a worker lost mid-upgrade."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from kubernetes import client as k8s
from temporalio.client import Client

from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.models.upgrade import Outcome, UpgradeResult
from tests.support.config import tuned
from tests.support.upgrade import (
    deployments,
    fresh_queues,
    running_worker,
    stable_container,
    start_upgrade,
    track_weight_is,
    track_weights,
    upgrade_req,
)
from tests.support.wait import until

pytestmark = pytest.mark.devstack


async def test_failed_backup_changes_nothing(
    fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None
) -> None:
    region = fleet_config.region("us-west-1")
    conf = k8s.Configuration()
    conf.host = region.kube.api_url
    crd = k8s.CustomObjectsApi(k8s.ApiClient(conf))
    body = {
        "apiVersion": "velero.io/v1",
        "kind": "BackupStorageLocation",
        "metadata": {"name": "lost-bucket", "namespace": fleet_config.backup.namespace},
        "spec": {"provider": "aws", "objectStorage": {"bucket": f"missing-{uuid.uuid4().hex[:6]}"}},
    }
    crd.create_namespaced_custom_object(
        "velero.io", "v1", fleet_config.backup.namespace, "backupstoragelocations", body
    )
    cfg = fresh_queues(fleet_config)
    cfg = tuned(cfg, "backup", storage_location="lost-bucket")
    before = {r: (stable_container(cfg, r).image, sorted(deployments(cfg, r))) for r in cfg.region_names}
    req = upgrade_req(cfg, "vllm/vllm-openai:v1.0.0")
    async with running_worker(temporal_client, cfg):
        handle = await start_upgrade(temporal_client, cfg, req)
        res = await asyncio.wait_for(result_of(handle, UpgradeResult), timeout=60)
    assert res.outcome is Outcome.BACKUP_FAILED, res
    assert "nothing changed" in res.reason and "NoSuchBucket" in res.reason
    assert res.waves == []
    after = {r: (stable_container(cfg, r).image, sorted(deployments(cfg, r))) for r in cfg.region_names}
    assert after == before
    assert all(track_weights(cfg, r)["stable"] == 100 for r in cfg.region_names)


async def test_abort_mid_canary_restores_stable(
    fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None
) -> None:
    cfg = fresh_queues(fleet_config)
    before = stable_container(cfg, "us-east-1").image
    req = upgrade_req(cfg, "vllm/vllm-openai:v1.1.0", steps_percent=[25, 50, 100], regions=["us-east-1"])
    req = req.model_copy(update={"step_pause_s": 4.0})
    async with running_worker(temporal_client, cfg):
        handle = await start_upgrade(temporal_client, cfg, req)
        await until(lambda: track_weight_is(cfg, "us-east-1", "canary", 25), "canary at 25 %")
        await handle.execute_update("abort", {"reason": "operator saw a problem", "by": "pytest"})
        res = await asyncio.wait_for(result_of(handle, UpgradeResult), timeout=60)
    assert res.outcome is Outcome.ABORTED and "operator saw a problem" in res.reason
    assert track_weights(cfg, "us-east-1")["stable"] == 100 and track_weights(cfg, "us-east-1")["canary"] == 0
    assert "llm-canary" not in deployments(cfg, "us-east-1")
    assert stable_container(cfg, "us-east-1").image == before


async def test_worker_lost_mid_upgrade_resumes(
    fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None
) -> None:
    cfg = fresh_queues(fleet_config)
    image = f"vllm/vllm-openai:v1.2.{uuid.uuid4().int % 1000}"
    req = upgrade_req(cfg, image, steps_percent=[50, 100], regions=["us-west-1"])
    req = req.model_copy(update={"step_pause_s": 2.0})
    async with running_worker(temporal_client, cfg):
        handle = await start_upgrade(temporal_client, cfg, req)
        await until(lambda: track_weight_is(cfg, "us-west-1", "canary", 50), "canary at 50 %")
    # The worker is gone mid-analysis; a new one on the same queues picks the workflow up.
    async with running_worker(temporal_client, cfg):
        res = await asyncio.wait_for(handle.result(), timeout=120)
    assert res.outcome is Outcome.SUCCEEDED, res
    assert stable_container(cfg, "us-west-1").image == image
    assert "llm-canary" not in deployments(cfg, "us-west-1")
