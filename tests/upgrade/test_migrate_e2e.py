"""Migration end to end on the dev stack: backup in one emulated cluster, restore in the other,
traffic follows through the global HAProxy."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from temporalio.client import Client

from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.models.migration import MigrationResult, migration_request
from drctl.models.upgrade import Outcome
from drctl.providers.haproxy_runtime import HAProxyRuntime
from tests.support.devstack import apps_api
from tests.support.upgrade import fresh_queues, running_worker, start_migration
from tests.support.wait import assert_eventually

pytestmark = pytest.mark.devstack


async def test_migration_moves_workload_and_traffic(
    fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None
) -> None:
    cfg = fresh_queues(fleet_config)
    west, east = cfg.region("us-west-1"), cfg.region("us-east-1")
    marker = f"vllm/vllm-openai:v2.0.{uuid.uuid4().int % 1000}"
    # What only the source runs: after the migration the target must run it too.
    apps_api(west.kube.api_url or "").patch_namespaced_deployment(
        "llm-stable",
        west.kube.namespace,
        {"spec": {"template": {"spec": {"containers": [{"name": "server", "image": marker}]}}}},
    )
    req = migration_request(cfg, uuid.uuid4().hex[:8], "us-west-1", "us-east-1", steps_percent=[50, 100])
    req = req.model_copy(
        update={"step_pause_s": 1.0, "limits": req.limits.model_copy(update={"min_samples": 8})}
    )
    async with running_worker(temporal_client, cfg):
        handle = await start_migration(temporal_client, cfg, req)
        res = await asyncio.wait_for(result_of(handle, MigrationResult), timeout=180)
    assert res.outcome is Outcome.SUCCEEDED, (
        f"{res.outcome.value} at {res.failed_step}: {res.reason}; {res.rollback}"
    )
    assert res.restore is not None and res.restore.phase == "Completed"
    moved = apps_api(east.kube.api_url or "").read_namespaced_deployment("llm-stable", east.kube.namespace)
    assert moved.spec.template.spec.containers[0].image == marker
    assert moved.metadata.labels["velero.io/restore-name"] == f"migrate-{req.migration_id}"
    g = cfg.traffic.global_tier
    assert HAProxyRuntime(g.runtime_socket).get_weights(g.backend) == {"us-west-1": 0, "us-east-1": 100}
    served = set()
    async with httpx.AsyncClient(timeout=5) as http:
        for _ in range(10):
            r = await http.post(
                f"{cfg.traffic.global_endpoint}/v1/completions",
                json={"model": cfg.workload.model, "prompt": "hi", "max_tokens": 1},
            )
            assert r.status_code == 200
            served.add(r.headers["X-Fleetsim-Region"])
    assert served == {"us-east-1"}


async def test_migration_target_failing_mid_shift_rolls_back(
    fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None
) -> None:
    cfg = fresh_queues(fleet_config)
    g = cfg.traffic.global_tier
    runtime = HAProxyRuntime(g.runtime_socket)
    before = runtime.get_weights(g.backend)
    assert before == {"us-west-1": 60, "us-east-1": 40}
    req = migration_request(cfg, uuid.uuid4().hex[:8], "us-west-1", "us-east-1", steps_percent=[50, 100])
    # A window long enough for the fault below to land inside the first step's analysis.
    req = req.model_copy(
        update={"step_pause_s": 3.0, "limits": req.limits.model_copy(update={"min_samples": 8})}
    )
    async with running_worker(temporal_client, cfg):
        handle = await start_migration(temporal_client, cfg, req)
        # The target goes bad once it carries migrated traffic: its replicas start failing requests.
        await assert_eventually(
            lambda: asyncio.to_thread(lambda: runtime.get_weights(g.backend) != before),
            timeout_s=150,
            interval_s=0.05,
            what="the first traffic shift",
        )
        admin = (cfg.region("us-east-1").devstack_admin_url or "").rstrip("/")
        async with httpx.AsyncClient(timeout=10) as http:
            (await http.post(f"{admin}/faults/inference", json={"error_rate": 0.6})).raise_for_status()
        res = await asyncio.wait_for(result_of(handle, MigrationResult), timeout=180)
    assert res.outcome is Outcome.ROLLED_BACK, res
    assert res.failed_metric == "error_rate" and "us-east-1/stable error rate" in res.reason
    assert res.failed_step in ("shift-50", "shift-100"), res.failed_step
    assert res.rollback[:2] == [
        "global weights back to us-west-1 60 / us-east-1 40 (before the migration)",
        "us-east-1 scaled back to 2 replicas",
    ]
    assert res.rollback[2].startswith(
        f"us-east-1 restored from its own backup migrate-{req.migration_id}-rollback"
    )
    assert len(res.rollback) == 3
    assert runtime.get_weights(g.backend) == before and res.weights == before
    # The target's Deployment is back at its own size (the migration had scaled it up to take traffic).
    east = cfg.region("us-east-1")
    dep = apps_api(east.kube.api_url or "").read_namespaced_deployment("llm-stable", east.kube.namespace)
    assert dep.spec.replicas == east.replicas
