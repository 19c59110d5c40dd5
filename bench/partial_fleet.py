"""bench/partial.py's traffic and reads: the users' open-loop load, every replica's /metrics each second,
and the wait for a drained fleet between arms. Loopback only; every loop is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import math
import random
import time

import httpx

from bench.partial_report import Read
from drctl.config.schema import FleetConfig
from drctl.devstack.fleetsim_openai import MAX_TOKENS_CAP
from drctl.providers import completions
from drctl.providers.auth import auth_headers
from drctl.providers.replicas import KubernetesReplicaSource
from drctl.providers.traffic_factory import global_traffic
from drctl.providers.vllm_metrics import ReplicaTarget, read_replicas

REQUEST_TIMEOUT_S = 30.0  # a user gives up after this; fleetsim then aborts the queued request
MAX_IN_FLIGHT = 400  # a stuck endpoint must not grow the task set without bound


async def open_loop(
    cfg: FleetConfig,
    rps: float,
    until: float,
    out: list[tuple[float, float, bool, str | None]],
    seed: int | None,
) -> None:
    """Poisson arrivals at `rps` until the monotonic deadline `until` (loopback, bounded in count and time).

    Non-streamed: each request costs the client one response however long it is held, so a
    CPU-starved client does not fall behind (tests/support/load.py explains).
    """
    url, header = completions.url_of(cfg.traffic.global_endpoint), cfg.traffic.region_header
    assert url.startswith("http://127.0.0.1"), "benches send traffic only to loopback"
    body = {"model": cfg.workload.model, "prompt": "partial", "max_tokens": MAX_TOKENS_CAP}
    rng = random.Random(seed)
    cap = math.ceil(rps * (until - time.monotonic()) * 1.5) + 10
    inflight: set[asyncio.Task[None]] = set()

    async def one(client: httpx.AsyncClient) -> None:
        t0 = time.monotonic()
        try:
            r = await client.post(url, json=body)
            ok, region = r.status_code == 200, r.headers.get(header)
        except httpx.HTTPError:
            ok, region = False, None
        out.append((t0, time.monotonic(), ok, region))

    limits = completions.fresh_connections(MAX_IN_FLIGHT)  # each request balanced with today's weights
    async with httpx.AsyncClient(
        timeout=REQUEST_TIMEOUT_S, limits=limits, headers=auth_headers(cfg)
    ) as client:
        try:
            while time.monotonic() < until and len(out) + len(inflight) < cap:
                if len(inflight) < MAX_IN_FLIGHT:
                    task = asyncio.create_task(one(client))
                    inflight.add(task)
                    task.add_done_callback(inflight.discard)
                await asyncio.sleep(rng.expovariate(rps))
        finally:
            for t in inflight:
                t.cancel()
            await asyncio.gather(*inflight, return_exceptions=True)


async def _targets(cfg: FleetConfig, source: KubernetesReplicaSource) -> list[ReplicaTarget]:
    found = await asyncio.gather(*(source.replicas(r) for r in cfg.regions))
    return [
        ReplicaTarget(r.name, e.name, e.url) for r, eps in zip(cfg.regions, found, strict=True) for e in eps
    ]


async def read_fleet(cfg: FleetConfig, t0: float, until: float, reads: list[Read]) -> None:
    """Every replica's /metrics and the global weights about once a second, from t0 to `until`."""
    source, listed, targets = KubernetesReplicaSource(cfg), float("-inf"), []
    order = [r.name for r in cfg.regions]
    traffic = global_traffic(cfg)
    async with httpx.AsyncClient(trust_env=False) as client:
        while (now := time.monotonic()) <= until:
            if now - listed >= 5.0:  # the platform owns the replica set: a scale-up adds some
                targets, listed = await _targets(cfg, source), now
            t = time.monotonic() - t0
            (snaps, failed), w = await asyncio.gather(
                read_replicas(client, targets, timeout_s=cfg.health.probe_timeout_s),
                asyncio.to_thread(traffic.get_weights),
            )
            weights = {r: w[r] for r in order if r in w}
            reads.append(Read(t_s=round(t, 3), snapshots=snaps, weights=weights, failed=failed))
            await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - now)))


async def wait_drained(cfg: FleetConfig, timeout_s: float) -> None:
    """Until no replica has a request waiting: the last arm's backlog is gone (probes sample too few
    replicas to tell). The gateway holds a request its user gave up on until its `timeout server`
    (120 s), so a replica can be minutes of work behind when an arm ends."""
    source, deadline = KubernetesReplicaSource(cfg), time.monotonic() + timeout_s
    async with httpx.AsyncClient(trust_env=False) as client:
        while True:
            snaps, _ = await read_replicas(client, await _targets(cfg, source), timeout_s=5)
            waiting = {s.source: s.queue for s in snaps if s.queue}
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"replicas still have requests waiting after {timeout_s:g}s: {waiting}")
            await asyncio.sleep(1.0)
