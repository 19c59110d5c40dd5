"""Replicas loading their model are capacity coming, not failing replicas.

A real fleetsim subprocess loads (its port closed, as vLLM keeps it while it reads weights) beside
two serving fleetsim replicas. The EndpointSlices of the emulated Kubernetes API list it as not
ready, as the EndpointSlice controller does for a pod whose readiness probe has not passed yet,
and a real HAProxy gateway routes only to the ready two.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from aiohttp import web
from kubernetes import client

from drctl.config.schema import FleetConfig
from drctl.devstack.fleetsim import FleetsimSettings, build_app
from drctl.devstack.kube import RegionCluster
from drctl.models.health import ProbeStatus
from drctl.providers.probe import InferenceProber
from tests.support.config import one_region_config
from tests.support.haproxy_binaries import debian
from tests.support.http_stub import serve_app
from tests.support.kubeapi import endpoint_slice
from tests.support.loop_thread import LoopThread
from tests.support.ports import free_port, listening
from tests.support.wait import assert_eventually

LOAD_S = 120  # far longer than the test: the replica loads throughout, and is killed at the end


@pytest.fixture
async def serving() -> AsyncIterator[dict[str, str]]:
    runners: list[web.AppRunner] = []
    urls: dict[str, str] = {}
    for name in ("r0", "r1"):
        runner, urls[name] = await serve_app(build_app(FleetsimSettings(region="us-west-1", replica=name)))
        runners.append(runner)
    yield urls
    for runner in runners:
        await runner.cleanup()


async def _loading_replica(port: int) -> asyncio.subprocess.Process:
    env = {**os.environ, "FLEETSIM_LOAD_S": str(LOAD_S), "FLEETSIM_REPLICA": "new"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "drctl.devstack.fleetsim", "--port", str(port), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert proc.stdout is not None
    # It says so once it runs: from here on its closed port is a replica loading, not one starting.
    line = await asyncio.wait_for(proc.stdout.readline(), 15)
    assert b"loading fleetsim-tiny" in line, line
    return proc


async def _gateway(tmp_path: Path, urls: dict[str, str]) -> tuple[asyncio.subprocess.Process, str]:
    port = free_port()
    servers = "".join(f"    server {n} {urlsplit(u).netloc}\n" for n, u in urls.items())
    (tmp_path / "gw.cfg").write_text(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n"
        f"frontend gw\n    bind 127.0.0.1:{port}\n    default_backend serving\n"
        f"backend serving\n{servers}"
    )
    proc = await asyncio.create_subprocess_exec(
        debian(), "-db", "-f", str(tmp_path / "gw.cfg"), stdout=asyncio.subprocess.DEVNULL
    )
    await assert_eventually(
        lambda: asyncio.to_thread(listening, port), timeout_s=10, what="HAProxy listening"
    )
    return proc, f"http://127.0.0.1:{port}"


def _cfg(gateway_url: str, kube_url: str) -> FleetConfig:
    return one_region_config(
        "probe-loading",
        gateway_url,
        f'{{api_url: "{kube_url}", namespace: inference}}',
        "health: {interval_s: 5, probe_timeout_s: 1.5, ttft_degraded_ms: 300, completion_sample: 1}\n",
    )


async def test_loading_replica_is_reported_apart_and_the_region_stays_healthy(
    serving: dict[str, str], tmp_path: Path
) -> None:
    new_port = free_port()
    loading = await _loading_replica(new_port)
    gateway, gateway_url = await _gateway(tmp_path, serving)
    lt = LoopThread()
    try:
        _, kube_url = lt.serve_cluster(RegionCluster)
        api = client.DiscoveryV1Api(client.ApiClient(client.Configuration(host=kube_url)))
        ports = {n: int(u.rsplit(":", 1)[1]) for n, u in serving.items()} | {"new": new_port}
        for pod, port in ports.items():
            slice_ = endpoint_slice(f"llm-stable-{pod}", "llm-stable", pod, port, ready=pod != "new")
            api.create_namespaced_endpoint_slice("inference", slice_)
        prober = InferenceProber(_cfg(gateway_url, kube_url))
        for _ in range(3):  # several rounds: monitors judge a region over consecutive probes
            p = await prober.probe_region("us-west-1")
            assert p.status == ProbeStatus.HEALTHY, p.reason
            assert p.loading == ["new"], p
            assert sorted(r.target for r in p.replicas) == ["r0", "r1"]
            assert p.failing_fraction == 0
            assert "2/2 replicas healthy" in p.reason and "1 loading (new)" in p.reason, p.reason
        # A ready replica that fails is still a failing one: loading ones change nothing about that.
        await asyncio.to_thread(_down, serving["r1"])
        p = await prober.probe_region("us-west-1")
        assert p.status == ProbeStatus.DEGRADED and p.failing_fraction == 0.5, p.reason
        assert p.loading == ["new"]
    finally:
        lt.close()
        for proc in (loading, gateway):
            proc.kill()
            await proc.wait()


def _down(url: str) -> None:
    import httpx

    httpx.post(f"{url}/admin/fault", json={"down": True}, timeout=2).raise_for_status()
