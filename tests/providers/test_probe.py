"""InferenceProber against real fleetsim servers, with faults injected through /admin/fault.

One fleetsim stands in for the region gateway and two for its replicas. The replicas are handed
to the prober as a fixed list (the prober's judgement is under test here); how a cluster's
EndpointSlices become that list is tested at the end, and in tests/providers/test_replicas.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from aiohttp import web
from kubernetes import client

from drctl.config.schema import ConfigError, FleetConfig, RegionConfig
from drctl.devstack.fleetsim import FleetsimSettings, build_app
from drctl.devstack.kube import RegionCluster
from drctl.models.health import ProbeStatus, RegionProbe
from drctl.providers import prom
from drctl.providers.probe import InferenceProber
from drctl.providers.replicas import ReplicaEndpoint
from tests.support.config import one_region_config
from tests.support.haproxy_binaries import debian
from tests.support.http_stub import serve_app
from tests.support.kubeapi import endpoint_slice
from tests.support.loop_thread import LoopThread
from tests.support.ports import free_port, listening
from tests.support.wait import assert_eventually

TIMEOUT_S = 1.5  # generous: these machines are noisy, and a slow answer must not read as a timeout
TTFT_DEGRADED_MS = 300.0  # fleetsim's TTFT is 30 ms; x20 is well past this


class Stack:
    def __init__(self) -> None:
        self.urls: dict[str, str] = {}
        self.listed: list[ReplicaEndpoint] = []  # what the replica source answers
        self.runners: list[web.AppRunner] = []

    async def serve(self, app: web.Application) -> str:
        runner, url = await serve_app(app)
        self.runners.append(runner)
        return url

    async def fault(self, name: str, **spec: Any) -> None:
        async with httpx.AsyncClient(timeout=2) as http:
            if spec:
                (await http.post(f"{self.urls[name]}/admin/fault", json=spec)).raise_for_status()
            else:
                (await http.delete(f"{self.urls[name]}/admin/fault")).raise_for_status()

    def list_replicas(self, *names: str) -> None:
        self.listed = [ReplicaEndpoint(name=n, url=self.urls[n], track="stable") for n in names]

    async def replicas(self, _region: RegionConfig) -> list[ReplicaEndpoint]:
        return list(self.listed)


@pytest.fixture(scope="module")
async def stack() -> AsyncIterator[Stack]:
    s = Stack()
    for name in ("gateway", "r0", "r1", "r2", "r3"):
        s.urls[name] = await s.serve(build_app(FleetsimSettings(region="us-west-1", replica=name)))
    yield s
    for runner in s.runners:
        await runner.cleanup()


@pytest.fixture
async def clean(stack: Stack) -> AsyncIterator[Stack]:
    stack.list_replicas("r0", "r1")
    yield stack
    for name in ("gateway", "r0", "r1", "r2", "r3"):
        await stack.fault(name)


def _cfg(gateway_url: str, model: str = "fleetsim-tiny", kube_url: str = "http://127.0.0.1:1") -> FleetConfig:
    return one_region_config(
        "probe-test",
        gateway_url,
        f'{{api_url: "{kube_url}", namespace: inference}}',
        f"""
workload: {{model: {model}}}
health: {{interval_s: 5, probe_timeout_s: {TIMEOUT_S}, ttft_degraded_ms: {TTFT_DEGRADED_MS}, completion_sample: 1}}
""",
    )


async def _probe(stack: Stack, gateway: str = "", **kw: Any) -> RegionProbe:
    cfg = _cfg(gateway or stack.urls["gateway"], **kw)
    return await InferenceProber(cfg, replica_source=stack).probe_region("us-west-1")


async def test_healthy_region(clean: Stack) -> None:
    p = await _probe(clean)
    assert p.status == ProbeStatus.HEALTHY, p.reason
    assert "2/2 replicas healthy" in p.reason
    assert [r.target for r in p.replicas] == ["r0", "r1"]
    for t in [p.gateway, *p.replicas]:
        assert t.status == ProbeStatus.HEALTHY and t.error_class is None and t.models_ok
        assert t.ttft_ms is not None and 20 <= t.ttft_ms < TTFT_DEGRADED_MS
        assert t.latency_ms is not None and t.kv_cache_usage is not None and t.queue_depth == 0
    assert p.failing_fraction == 0 and p.ttft_p50_ms is not None and p.probed_at


async def test_slow_ttft_is_degraded_not_down(clean: Stack) -> None:
    await clean.fault("gateway", added_latency_ms=30 * 19)  # TTFT x20
    p = await _probe(clean)
    assert p.status == ProbeStatus.DEGRADED, p.reason
    # Judged when the threshold passed with no first token, not when the slow answer came.
    assert p.gateway.ttft_ms is None and p.gateway.error_class == "slow"
    assert (
        p.reason
        == f"gateway degraded: slow TTFT: 3/3 completions had no first token within {TTFT_DEGRADED_MS:g}ms"
    )


async def test_half_failing_gateway_is_degraded(clean: Stack) -> None:
    await clean.fault("gateway", error_rate=0.5)
    p = await _probe(clean)
    assert p.status == ProbeStatus.DEGRADED, p.reason
    assert p.gateway.error_class == "http_5xx"
    assert "inference requests failed" in p.reason


async def test_one_of_two_replicas_down_is_degraded(clean: Stack) -> None:
    await clean.fault("r1", down=True)
    p = await _probe(clean)
    assert p.status == ProbeStatus.DEGRADED, p.reason
    assert p.failing_fraction == 0.5
    assert p.reason == "1/2 replicas failing: r1 http_5xx"


async def test_gateway_errors_explained_by_one_failing_replica_of_four_pass(clean: Stack) -> None:
    """A flapping replica's 503s reach users through the gateway until its checks drop it: lost
    capacity, not a region to fail over. The same errors with every replica passing /health are
    the region failing (the errors fault), and a second failing replica is over the bound."""
    clean.list_replicas("r0", "r1", "r2", "r3")
    await clean.fault("gateway", error_rate=0.5)
    await clean.fault("r1", down=True)
    p = await _probe(clean)
    assert p.status == ProbeStatus.HEALTHY, p.reason
    assert (
        p.reason.startswith("gateway errors from 1/4 failing replicas (r1): ")
        and "inference requests failed" in p.reason
    )
    await clean.fault("r2", down=True)
    p = await _probe(clean)
    assert p.status == ProbeStatus.DEGRADED and p.reason.startswith("gateway degraded: "), p.reason
    await clean.fault("r1")
    await clean.fault("r2")
    p = await _probe(clean)
    assert p.status == ProbeStatus.DEGRADED and p.reason.startswith("gateway degraded: "), p.reason


async def test_no_replica_serving_is_down(clean: Stack) -> None:
    await clean.fault("r0", down=True)
    await clean.fault("r1", error_rate=1.0)
    p = await _probe(clean)
    assert p.status == ProbeStatus.DOWN
    assert p.reason.startswith("no replica serving (0/2); r0: http_5xx")
    assert p.replicas[1].error_class == "http_5xx" and (p.replicas[1].error or "").startswith(
        "completion failed"
    )


async def test_gateway_down_fault(clean: Stack) -> None:
    await clean.fault("gateway", down=True)
    p = await _probe(clean)
    assert p.status == ProbeStatus.DOWN
    assert p.gateway.error_class == "http_5xx"
    assert p.reason.startswith(f"gateway {clean.urls['gateway']}: http_5xx")


async def test_missing_model(clean: Stack) -> None:
    p = await _probe(clean, model="llama-3-70b")
    assert p.status == ProbeStatus.DOWN
    assert {t.error_class for t in [p.gateway, *p.replicas]} == {"model_missing"}
    assert "model 'llama-3-70b' not served" in p.reason


async def test_hang_is_timeout_within_bound(clean: Stack) -> None:
    for name in ("gateway", "r0", "r1"):
        await clean.fault(name, hang=True)
    started = time.monotonic()
    p = await _probe(clean)
    elapsed = time.monotonic() - started
    assert p.status == ProbeStatus.DOWN
    assert {t.error_class for t in [p.gateway, *p.replicas]} == {"timeout"}
    # Bounded by the probe timeout: it waited for it (a hang is not an instant error) and no longer
    # than the gateway's and the replicas' timeouts in sequence, with slack for a loaded machine.
    assert TIMEOUT_S <= elapsed < 4 * TIMEOUT_S, f"probe of a hung region took {elapsed:.2f}s"


async def test_unlisted_and_unlistable_replicas(clean: Stack) -> None:
    clean.list_replicas()
    p = await _probe(clean)
    assert (p.status, p.reason) == (ProbeStatus.DOWN, "no replicas registered for the region")
    # An unreachable Kubernetes API (the default source) is no verdict on the region: the gateway decides.
    cfg = _cfg(clean.urls["gateway"], kube_url=f"http://127.0.0.1:{free_port()}")
    p = await InferenceProber(cfg).probe_region("us-west-1")
    assert p.status == ProbeStatus.HEALTHY
    assert "replica list unavailable: MaxRetryError" in p.reason, p.reason


async def test_killed_gateway_process(clean: Stack) -> None:
    port = free_port()
    env = {**os.environ, "FLEETSIM_REPLICA": "gw-proc", "FLEETSIM_REGION": "us-west-1"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "drctl.devstack.fleetsim", "--host", "127.0.0.1", "--port", str(port),
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    gateway = f"http://127.0.0.1:{port}"
    try:

        async def serving() -> bool:
            return (await _probe(clean, gateway=gateway)).status == ProbeStatus.HEALTHY

        await assert_eventually(serving, timeout_s=15, what="fleetsim subprocess serving")
        proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), 5)
        started = time.monotonic()
        p = await _probe(clean, gateway=gateway)
        assert (
            time.monotonic() - started < 4 * TIMEOUT_S
        )  # a refused connection never waits out the timeout twice
    finally:
        if proc.returncode is None:
            proc.kill()
            await asyncio.wait_for(proc.wait(), 5)
    assert p.status == ProbeStatus.DOWN
    assert p.gateway.error_class == "connect"
    assert p.reason.startswith(f"gateway {gateway}: connect: ClientConnectorError")


async def test_metrics_parser_reads_fleetsim(clean: Stack) -> None:
    async with httpx.AsyncClient(timeout=2) as http:
        text = (await http.get(f"{clean.urls['r0']}/metrics")).text
    samples = prom.parse_samples(text)
    assert samples[prom.VLLM_RUNNING] == 0 and samples[prom.VLLM_WAITING] == 0
    assert 0 <= samples[prom.VLLM_KV_CACHE] <= 1
    odd = (
        'vllm:num_requests_waiting{model_name="a b",x="q\\"}"} 3\n'
        'vllm:num_requests_waiting{model_name="c"} 4 1700000\nbad line\nx NaN\n'
    )
    assert prom.parse_samples(odd) == {"vllm:num_requests_waiting": 7.0}


async def test_replicas_from_kubernetes_endpoint_slices(clean: Stack) -> None:
    """The default replica source: the EndpointSlices of the track Services, not-ready ones as
    loading, terminating ones not at all (a pod being scaled away is not a failing replica)."""
    lt = LoopThread()
    try:
        _, kube_url = lt.serve_cluster(RegionCluster)
        api = client.DiscoveryV1Api(client.ApiClient(client.Configuration(host=kube_url)))
        for pod, ready in (("r0", True), ("r1", False)):
            api.create_namespaced_endpoint_slice(
                "inference",
                endpoint_slice(
                    f"llm-stable-{pod}", "llm-stable", pod, int(clean.urls[pod].rsplit(":", 1)[1]), ready
                ),
            )
        api.create_namespaced_endpoint_slice(
            "inference", endpoint_slice("llm-stable-old", "llm-stable", "old", 1, False, terminating=True)
        )
        # A slice of some other Service is not a replica of the fleet.
        api.create_namespaced_endpoint_slice("inference", endpoint_slice("other-x", "other", "x", 1, True))
        await clean.fault("r1", down=True)
        cfg = _cfg(clean.urls["gateway"], kube_url=kube_url)
        p = await InferenceProber(cfg).probe_region("us-west-1")
    finally:
        lt.close()
    # r1 is not ready in its slice: a pod still loading (issue 27), reported apart and not probed.
    assert [(r.target, r.url, r.status) for r in p.replicas] == [
        ("r0", clean.urls["r0"], ProbeStatus.HEALTHY)
    ]
    assert p.loading == ["r1"] and p.failing_fraction == 0
    assert p.status == ProbeStatus.HEALTHY and p.reason.endswith("1/1 replicas healthy; 1 loading (r1)"), (
        p.reason
    )


async def test_malformed_gateway_url_is_refused_by_the_config_or_a_result(clean: Stack) -> None:
    # The config refuses it when it loads, so no monitor ever probes one.
    with pytest.raises(ConfigError, match="regions\\[0\\].gateway_url: the port must be a number 1-65535"):
        _cfg("http://127.0.0.1:notaport")
    # A config built in code skips that check: the probe still answers with a result, not an exception.
    cfg = _cfg(clean.urls["gateway"])
    region = cfg.regions[0].model_copy(update={"gateway_url": "http://127.0.0.1:notaport"})
    cfg = cfg.model_copy(update={"regions": [region]})
    p = await InferenceProber(cfg, replica_source=clean).probe_region("us-west-1")
    assert p.status == ProbeStatus.DOWN
    assert p.gateway.error_class == "probe_error" and "notaport" in (p.gateway.error or "")


def test_vllm_gauges_read_either_generation_and_every_engine() -> None:
    # V1 with two data-parallel engines: queue and running add up, KV-cache fill is the fullest's.
    v1 = "".join(
        f'vllm:{name}{{engine="{e}",model_name="m"}} {value}\n'
        for name, values in (("num_requests_waiting", (2, 3)), ("num_requests_running", (4, 1)),
                             ("kv_cache_usage_perc", (0.25, 0.75)))
        for e, value in enumerate(values)
    )  # fmt: skip
    assert prom.vllm_gauges(v1) == {prom.VLLM_WAITING: 5, prom.VLLM_RUNNING: 5, prom.VLLM_KV_CACHE: 0.75}
    v0 = 'vllm:num_requests_waiting{model_name="m"} 1\nvllm:gpu_cache_usage_perc{model_name="m"} 0.5\n'
    assert prom.vllm_gauges(v0) == {prom.VLLM_WAITING: 1, prom.VLLM_KV_CACHE: 0.5}
    # A server between the two exports both names: the current one wins.
    both = 'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\nvllm:kv_cache_usage_perc{model_name="m"} 0.6\n'
    assert prom.vllm_gauges(both) == {prom.VLLM_KV_CACHE: 0.6}


async def test_gateway_health_503_from_one_replica_is_judged_by_its_completions(
    clean: Stack, tmp_path: Path
) -> None:
    """A real HAProxy in front of the replicas hands its /health to r0, which is down (as a
    round-robin gateway does about once per replica count, until its checks drop r0), and its
    other requests to r1, which serves. That 503 is one replica's answer, not the region's: the
    round is judged by the completions, and the region is DOWN only when none is answered."""
    port = free_port()
    r0, r1 = (urlsplit(clean.urls[n]).netloc for n in ("r0", "r1"))
    (tmp_path / "gw.cfg").write_text(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n"
        f"frontend gw\n    bind 127.0.0.1:{port}\n"
        "    use_backend health if { path /health }\n    default_backend serving\n"
        f"backend health\n    server r0 {r0}\nbackend serving\n    server r1 {r1}\n"
    )
    proc = await asyncio.create_subprocess_exec(
        debian(), "-db", "-f", str(tmp_path / "gw.cfg"), stdout=asyncio.subprocess.DEVNULL
    )
    gateway = f"http://127.0.0.1:{port}"
    try:
        await assert_eventually(
            lambda: asyncio.to_thread(listening, port), timeout_s=10, what="HAProxy listening"
        )
        await clean.fault("r0", down=True)
        clean.list_replicas("r0", "r1", "r2", "r3")  # one replica of four failing: lost capacity
        for _ in range(3):
            p = await _probe(clean, gateway=gateway)
            assert p.gateway.status == ProbeStatus.DEGRADED and p.gateway.error_class == "http_5xx"
            assert p.gateway.error == "1/5 inference requests failed: HTTP 503 from /health", p.gateway
            assert p.status == ProbeStatus.HEALTHY, p.reason
            assert p.reason.startswith("gateway errors from 1/4 failing replicas (r0): "), p.reason

        await clean.fault("r1", down=True)
        p = await _probe(clean, gateway=gateway)
        assert p.status == ProbeStatus.DOWN and p.reason.startswith(f"gateway {gateway}: http_5xx"), p.reason
        assert "completion failed (3/3)" in p.reason
    finally:
        proc.kill()
        await proc.wait()
