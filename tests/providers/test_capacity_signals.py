"""CapacitySignalReader against a real fleetsim bound by its max_num_seqs, found through the
EndpointSlices of an emulated cluster: a learned ceiling, a replica that cannot be read, a
not-ready one, and the Deployment's desired replicas."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from kubernetes import client

from drctl.config.schema import FleetConfig, parse_config
from drctl.devstack.fleetsim import FleetsimSettings, build_app
from drctl.devstack.kube import RegionCluster
from drctl.models.capacity import CapacitySpec, region_capacity
from drctl.models.capacity_sample import CapacityReadResult
from drctl.providers.capacity_signals import CapacitySignalReader
from drctl.providers.replicas import KubernetesReplicaSource
from tests.support.kube_cluster import deployment_manifest
from tests.support.kubeapi import NS, endpoint_slice
from tests.support.loop_thread import LoopThread
from tests.support.ports import free_port

MAX_NUM_SEQS = 2
STREAMS = 6  # three times the slots: four always wait
ITL_MS = 20.0


@dataclass
class Env:
    cfg: FleetConfig
    url: str
    dead: int


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    lt = LoopThread()
    try:
        _, kube_url = lt.serve_cluster(RegionCluster)
        port, dead = free_port(), free_port()  # nothing listens on `dead`
        settings = FleetsimSettings(
            region="us-west-1", replica="r0", max_num_seqs=MAX_NUM_SEQS, ttft_ms=20, itl_ms=ITL_MS
        )
        lt.serve_app(build_app(settings), port)
        api = client.ApiClient(client.Configuration(host=kube_url))
        for pod, p, ready in (("r0", port, True), ("r1", dead, True), ("r2", port, False)):
            client.DiscoveryV1Api(api).create_namespaced_endpoint_slice(
                NS, endpoint_slice(f"llm-stable-{pod}", "llm-stable", pod, p, ready)
            )
        client.AppsV1Api(api).create_namespaced_deployment(NS, deployment_manifest("llm-stable", replicas=3))
        cfg = parse_config(f"""
name: capacity-test
regions:
  - name: us-west-1
    weight: 60
    gateway_url: http://127.0.0.1:1
    kube: {{api_url: "{kube_url}", namespace: {NS}}}
workload: {{model: fleetsim-tiny}}
health: {{interval_s: 5, probe_timeout_s: 1.5}}
traffic:
  global_endpoint: http://127.0.0.1:1
  global: {{kind: route53, hosted_zone_id: Z1, record_name: api.example.com, targets: {{us-west-1: a}}}}
  regional: {{kind: gateway-api}}
""")
        yield Env(cfg, f"http://127.0.0.1:{port}", dead)
    finally:
        lt.close()


def _streams(url: str, stop: threading.Event) -> None:
    body = {"model": "fleetsim-tiny", "prompt": "hi", "max_tokens": 15, "stream": True}
    end = time.monotonic() + 20
    with httpx.Client(timeout=10, trust_env=False) as c:
        for _ in range(200):  # bounded in count and in time
            if stop.is_set() or time.monotonic() > end:
                return
            with c.stream("POST", f"{url}/v1/completions", json=body) as resp:
                resp.read()


async def _read(env: Env, previous: CapacityReadResult | None = None) -> CapacityReadResult:
    reader = CapacitySignalReader(env.cfg, KubernetesReplicaSource(env.cfg))
    try:
        return await reader.read("us-west-1", previous.sample if previous else None, 60)
    finally:
        await reader.aclose()


def test_an_idle_region_counts_ready_endpoints_and_names_what_it_could_not_read(env: Env) -> None:
    s = asyncio.run(_read(env)).signals
    # r2 is not ready: not counted. r1 is ready but nothing answers on its port.
    assert (s.ready_replicas, s.desired_replicas, s.replicas_read) == (2, 3, 1), s
    assert (s.running, s.waiting, s.running_while_waiting, s.max_num_seqs) == (0, 0, None, None)
    assert len(s.problems) == 1 and s.problems[0].startswith(
        f"replica r1 (http://127.0.0.1:{env.dead}) /metrics: ConnectError"
    ), s.problems
    # Nothing queued yet: the learned capacity is unknown, not zero and not infinite.
    assert not region_capacity(s, CapacitySpec(ttft_p99_ms=200)).known


def test_a_queue_shows_the_slot_ceiling_and_ttft_grows_with_it(env: Env) -> None:
    stop = threading.Event()
    loaders = [threading.Thread(target=_streams, args=(env.url, stop), daemon=True) for _ in range(STREAMS)]

    async def run() -> CapacityReadResult:
        for t in loaders:
            t.start()
        await asyncio.sleep(1.5)
        first = await _read(env)
        await asyncio.sleep(2)
        return await _read(env, first)

    try:
        got = asyncio.run(run())
    finally:
        stop.set()
        for t in loaders:
            t.join(timeout=15)
    s = got.signals
    assert s.running == MAX_NUM_SEQS and s.waiting >= 1, s
    assert s.running_while_waiting == MAX_NUM_SEQS, s
    # Each request holds a slot for about 15 tokens x 20 ms; a waiting one first waits for a slot.
    assert s.ttft_p99_ms is not None and s.ttft_p99_ms > 200, s
    assert s.load_rps and s.requests and s.window_s > 1.5, s
    learned = region_capacity(s, CapacitySpec())
    # Two slots a replica, two ready replicas; the load is scaled from the one replica read.
    assert (learned.source, learned.per_replica, learned.capacity) == ("learned", 2, 4)
    assert learned.evidence["ceiling"] == "running while requests wait"
    assert learned.load == pytest.approx((s.running + s.waiting) * 2)
    # Against a 200 ms objective the replicas already serve fewer than their slots within it.
    bound = region_capacity(s, CapacitySpec(ttft_p99_ms=200))
    assert bound.per_replica < MAX_NUM_SEQS and "latency_bound_per_replica" in bound.evidence
