"""Migration end to end on the dev stack: backup in one emulated cluster, restore in the other,
traffic follows through the global HAProxy."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from temporalio.client import Client

from drctl.config import FleetConfig
from drctl.models.upgrade import Outcome, migration_request
from drctl.operations import start_operation
from drctl.providers.haproxy_runtime import HAProxyRuntime
from tests.conftest import apps_api
from tests.upgrade.workers import fresh_queues, running_worker
from workflows.migrate import Migration

pytestmark = pytest.mark.devstack


async def test_migration_moves_workload_and_traffic(fleet_config: FleetConfig, temporal_client: Client,
                                                    reset_fleet: None) -> None:
    cfg = fresh_queues(fleet_config)
    west, east = cfg.region("us-west-1"), cfg.region("us-east-1")
    marker = f"vllm/vllm-openai:v2.0.{uuid.uuid4().int % 1000}"
    # What only the source runs: after the migration the target must run it too.
    apps_api(west.kube.api_url or "").patch_namespaced_deployment(
        "llm-stable", west.kube.namespace,
        {"spec": {"template": {"spec": {"containers": [{"name": "server", "image": marker}]}}}},
    )
    req = migration_request(cfg, uuid.uuid4().hex[:8], "us-west-1", "us-east-1", steps_percent=[50, 100])
    req = req.model_copy(update={"step_pause_s": 1.0, "limits": req.limits.model_copy(update={"min_samples": 8})})
    async with running_worker(temporal_client, cfg):
        handle = await start_operation(temporal_client, cfg, Migration.run, req, operation="migrate",
                                       workflow_id=f"migrate/{cfg.name}/{req.migration_id}",
                                       source="us-west-1", target="us-east-1")
        res = await asyncio.wait_for(handle.result(), timeout=180)
    assert res.outcome is Outcome.SUCCEEDED, res
    assert res.restore is not None and res.restore.phase == "Completed"
    moved = apps_api(east.kube.api_url or "").read_namespaced_deployment("llm-stable", east.kube.namespace)
    assert moved.spec.template.spec.containers[0].image == marker
    assert moved.metadata.labels["velero.io/restore-name"] == f"migrate-{req.migration_id}"
    g = cfg.traffic.global_tier
    assert HAProxyRuntime(g.runtime_socket).get_weights(g.backend) == {"us-west-1": 0, "us-east-1": 100}
    served = set()
    async with httpx.AsyncClient(timeout=5) as http:
        for _ in range(10):
            r = await http.post(f"{cfg.traffic.global_endpoint}/v1/completions",
                                json={"model": cfg.workload.model, "prompt": "hi", "max_tokens": 1})
            assert r.status_code == 200
            served.add(r.headers["X-Fleetsim-Region"])
    assert served == {"us-east-1"}
