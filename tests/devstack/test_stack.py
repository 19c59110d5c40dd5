"""End to end: the dev stack as a user and the product see it (acceptance list of the foundation)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from openai import OpenAI
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from drctl.client.connection import connect
from drctl.config.schema import FleetConfig, load_config
from drctl.devstack import moto_seed, processes, stack
from drctl.models import search_attributes
from tests.support.cli import drctl
from tests.support.config import write_fleet_config
from tests.support.devstack import apps_api
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow


def test_openai_client_completion_and_stream(dev_stack: stack.StackInfo, fleet_config: FleetConfig) -> None:
    client = OpenAI(base_url=f"{dev_stack.global_endpoint}/v1", api_key="unused", timeout=10, max_retries=0)
    done = client.completions.create(model=fleet_config.workload.model, prompt="Say hello", max_tokens=5)
    assert done.choices[0].text.strip()
    assert done.model == fleet_config.workload.model
    chunks = list(
        client.chat.completions.create(
            model=fleet_config.workload.model,
            messages=[{"role": "user", "content": "Say hello"}],
            max_tokens=6,
            stream=True,
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(chunks) > 1 and text.strip()


def test_global_split_follows_configured_weights(
    dev_stack: stack.StackInfo, fleet_config: FleetConfig
) -> None:
    url = f"{dev_stack.global_endpoint}/v1/completions"
    body = {"model": fleet_config.workload.model, "prompt": "x", "max_tokens": 1}
    deadline = time.monotonic() + 60
    with httpx.Client(timeout=5) as http:

        def one(_: int) -> str:
            if time.monotonic() > deadline:
                return "deadline"
            r = http.post(url, json=body)
            return (
                r.headers.get("X-Fleetsim-Region", f"status {r.status_code}")
                if r.status_code == 200
                else "error"
            )

        with ThreadPoolExecutor(max_workers=8) as pool:
            regions = Counter(pool.map(one, range(1000)))
    assert sum(regions[r.name] for r in fleet_config.regions) == 1000, regions
    for name, share in fleet_config.normalised_weights().items():
        assert abs(regions[name] / 1000 - share) <= 0.05, (name, regions)


def test_dev_up_again_leaves_running_stack_alone(
    dev_stack: stack.StackInfo, fleet_config: FleetConfig, fleet_config_path: Path
) -> None:
    again = stack.up(fleet_config, fleet_config_path, timeout_s=60)
    assert again.started == []
    assert again.pids == dev_stack.pids


def test_killed_replica_is_replaced(
    dev_stack: stack.StackInfo, fleet_config: FleetConfig, reset_fleet: None
) -> None:
    region = fleet_config.regions[0]
    admin = f"{region.devstack_admin_url}/replicas"
    deployment = fleet_config.workload.deployment_name("stable")
    victim = next(r for r in httpx.get(admin, timeout=5).json() if r["deployment"] == deployment)
    os.kill(victim["pid"], signal.SIGKILL)
    apps = apps_api(region.kube.api_url or "")

    def replaced() -> bool:
        pods = {r["pod"]: r for r in httpx.get(admin, timeout=5).json()}
        new = pods.get(victim["pod"])
        ready = apps.read_namespaced_deployment(deployment, region.kube.namespace).status.ready_replicas
        return bool(
            new and new["pid"] != victim["pid"] and new["state"] == "running" and ready == region.replicas
        )

    wait_until(replaced, timeout_s=30, interval_s=0.2, what=f"{victim['pod']} replaced and ready")
    assert not processes.pid_alive(victim["pid"])


def test_kubernetes_client_reads_and_scales_each_region(
    dev_stack: stack.StackInfo, fleet_config: FleetConfig, reset_fleet: None
) -> None:
    name = fleet_config.workload.deployment_name("stable")
    for region in fleet_config.regions:
        apps = apps_api(region.kube.api_url or "")
        ns = region.kube.namespace
        dep = apps.read_namespaced_deployment(name, ns)
        assert dep.spec.replicas == region.replicas
        assert dep.metadata.labels["drctl.io/track"] == "stable"
        apps.patch_namespaced_deployment_scale(name, ns, {"spec": {"replicas": region.replicas + 1}})

        def scaled(apps=apps, ns=ns, region=region) -> bool:  # type: ignore[no-untyped-def]
            running = [
                r
                for r in httpx.get(f"{region.devstack_admin_url}/replicas", timeout=5).json()
                if r["deployment"] == name and r["state"] == "running"
            ]
            ready = apps.read_namespaced_deployment_scale(name, ns)
            status = apps.read_namespaced_deployment(name, ns).status
            return (
                ready.spec.replicas == region.replicas + 1
                and status.ready_replicas == len(running) == region.replicas + 1
            )

        wait_until(
            scaled, timeout_s=30, interval_s=0.2, what=f"{region.name} scaled to {region.replicas + 1}"
        )


def test_dev_status_cli(dev_stack: stack.StackInfo, fleet_config_path: Path) -> None:
    done = drctl("dev", "status", "-c", str(fleet_config_path), "--output", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {c["name"] for c in report["components"]} == set(dev_stack.pids)
    for c in report["components"]:
        assert c["alive"] and c["pid"] == dev_stack.pids[c["name"]], c
        assert all(p["open"] for p in c["ports"].values()), c
    table = drctl("dev", "status", "-c", str(fleet_config_path))
    assert table.returncode == 0 and "haproxy-global" in table.stdout


async def test_temporal_client_sees_registered_search_attributes(temporal_client: Client) -> None:
    resp = await temporal_client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=temporal_client.namespace)
    )
    assert {k.name for k in search_attributes.ALL} <= set(resp.custom_attributes)


def _stack_pids(cfg: FleetConfig) -> list[int]:
    """Every pid the stack runs: recorded components plus the replicas the admin APIs list."""
    record = json.loads((stack.state_dir(cfg) / "stack.json").read_text())
    pids = [c["pid"] for c in record["components"].values()]
    for r in cfg.regions:
        pids += [rep["pid"] for rep in httpx.get(f"{r.devstack_admin_url}/replicas", timeout=5).json()]
    return pids


def _assert_nothing_left(cfg: FleetConfig, pids: list[int]) -> None:
    survivors = [p for p in pids if processes.pid_alive(p)]
    assert survivors == [], [processes.cmdline(p) for p in survivors]
    assert processes.pids_mentioning(f"{stack.state_dir(cfg)}/") == []
    assert list(stack.state_dir(cfg).glob("pids/*.pid")) == []
    assert list(stack.state_dir(cfg).glob("haproxy/*.sock")) == []


async def _start_probe_workflow(cfg: FleetConfig, workflow_id: str) -> None:
    client = await connect(cfg)
    # No worker polls this queue: the workflow simply stays Running, which is all history needs.
    await client.start_workflow(
        "HistoryProbe",
        id=workflow_id,
        task_queue=f"probe-{uuid.uuid4()}",
        search_attributes=TypedSearchAttributes([SearchAttributePair(search_attributes.FLEET, cfg.name)]),
    )


async def _describe(cfg: FleetConfig, workflow_id: str):  # type: ignore[no-untyped-def]
    client = await connect(cfg)
    return await client.get_workflow_handle(workflow_id).describe()


@pytest.mark.ownstack
async def test_cli_up_down_history_and_port_conflict() -> None:
    # Its own stack on its own ports and state dir, with a non-default namespace.
    path = write_fleet_config(namespace="drctl-cli")
    cfg = load_config(path)
    try:
        up = await asyncio.to_thread(drctl, "dev", "up", "-c", str(path))
        assert up.returncode == 0, up.stdout + up.stderr
        assert cfg.traffic.global_endpoint in up.stdout and str(stack.state_dir(cfg)) in up.stdout
        # A dead component is restarted (and moto, in-memory, re-seeded); live ones are left alone.
        before = json.loads((stack.state_dir(cfg) / "stack.json").read_text())["components"]
        os.kill(before["moto"]["pid"], signal.SIGKILL)
        wait_until(lambda: not processes.pid_alive(before["moto"]["pid"]), timeout_s=5, what="moto gone")
        up = await asyncio.to_thread(drctl, "dev", "up", "-c", str(path))
        assert up.returncode == 0, up.stdout + up.stderr
        after = json.loads((stack.state_dir(cfg) / "stack.json").read_text())["components"]
        assert after["moto"]["pid"] != before["moto"]["pid"]
        assert {n: c["pid"] for n, c in after.items() if n != "moto"} == {
            n: c["pid"] for n, c in before.items() if n != "moto"
        }
        s3 = moto_seed.aws_client(cfg, "s3")
        assert {cfg.backup.bucket, cfg.drills.history_bucket} <= {
            b["Name"] for b in s3.list_buckets()["Buckets"]
        }
        workflow_id = f"history-probe-{uuid.uuid4()}"
        await _start_probe_workflow(cfg, workflow_id)

        pids = _stack_pids(cfg)
        down = await asyncio.to_thread(drctl, "dev", "down", "-c", str(path))
        assert down.returncode == 0, down.stderr
        _assert_nothing_left(cfg, pids)

        # History and the registered search attributes survive a restart on the same SQLite file.
        up = await asyncio.to_thread(drctl, "dev", "up", "-c", str(path))
        assert up.returncode == 0, up.stdout + up.stderr
        desc = await _describe(cfg, workflow_id)
        assert desc.status == WorkflowExecutionStatus.RUNNING
        assert desc.typed_search_attributes.get(search_attributes.FLEET) == cfg.name

        pids = _stack_pids(cfg)
        down = await asyncio.to_thread(drctl, "dev", "down", "-c", str(path))
        assert down.returncode == 0, down.stderr
        _assert_nothing_left(cfg, pids)

        # A port taken by someone else: exit 2 naming it, and nothing is started.
        port = int(cfg.traffic.global_endpoint.rsplit(":", 1)[1])
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", port))
            squatter.listen()
            conflict = await asyncio.to_thread(drctl, "dev", "up", "-c", str(path))
        assert conflict.returncode == 2, conflict.stdout + conflict.stderr
        assert f"port {port} (global endpoint) is already in use" in conflict.stderr
        assert not processes.port_open(int(cfg.temporal.address.rsplit(":", 1)[1]))
        _assert_nothing_left(cfg, [])
    finally:
        stack.down(cfg)
        shutil.rmtree(path.parent, ignore_errors=True)
