"""Every replica's vLLM `/metrics` as passive signals: request and 5xx counters, TTFT and e2e histograms.

Counts come from `http_requests_total{handler,method,status}`, which vLLM's API server exposes
through prometheus-fastapi-instrumentator with its defaults (vllm/entrypoints/serve/instrumentator/
metrics.py: status grouped as "2xx".."5xx"), over the generation handlers only (a probe of
/v1/models is not user traffic). A server without that counter still exposes
`vllm:request_success_total`; requests are then the successes and errors are unknown (counted 0),
so such a replica can breach on TTFT but never on errors. `/metrics` needs no API key in vLLM.

Reads run concurrently on one pooled client: each replica's deadline starts when its request
starts, not while it waits for a free slot, so a long queue never looks like a slow replica.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from drctl.models.passive import SignalSnapshot
from drctl.providers.prom import (
    HTTP_REQUESTS,
    VLLM_E2E,
    VLLM_SUCCESS,
    VLLM_TTFT,
    VLLM_WAITING,
    histogram,
    parse_series,
    total,
)

GENERATION_HANDLERS = frozenset({"/v1/completions", "/v1/chat/completions", "/v1/responses"})


@dataclass(frozen=True)
class ReplicaTarget:
    region: str
    name: str
    url: str  # base URL; /metrics is appended


def replica_snapshot(text: str, *, region: str, source: str, taken_at: float) -> SignalSnapshot:
    """A snapshot from one /metrics page (Prometheus text format)."""
    series = parse_series(text)
    http = [
        (labels, v)
        for n, labels, v in series
        if n == HTTP_REQUESTS and labels.get("handler") in GENERATION_HANDLERS
    ]
    if http:
        requests = sum(v for _, v in http)
        errors = sum(v for labels, v in http if labels.get("status", "").startswith("5"))
    else:
        requests, errors = total(series, VLLM_SUCCESS) or 0.0, 0.0
    return SignalSnapshot(
        source=source,
        kind="replica",
        region=region,
        taken_at=taken_at,
        requests_total=requests,
        errors_total=errors,
        ttft=histogram(series, VLLM_TTFT),
        e2e=histogram(series, VLLM_E2E),
        queue=total(series, VLLM_WAITING),
    )


async def read_replica(
    client: httpx.AsyncClient,
    target: ReplicaTarget,
    *,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> SignalSnapshot:
    """Read one replica's /metrics; raises httpx.HTTPError (or TimeoutError) when it cannot be read."""
    async with asyncio.timeout(timeout_s):
        resp = await client.get(f"{target.url.rstrip('/')}/metrics", timeout=timeout_s)
    resp.raise_for_status()
    return replica_snapshot(resp.text, region=target.region, source=target.name, taken_at=clock())


async def read_replicas(
    client: httpx.AsyncClient,
    targets: list[ReplicaTarget],
    *,
    timeout_s: float,
    concurrency: int = 64,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[list[SignalSnapshot], dict[str, str]]:
    """Read every target at most `concurrency` at a time: the snapshots, and why each failed read failed.

    A failed read is reported, never turned into a zero: the evaluator then counts that replica as
    missing once its last good read is older than max_age_s.
    """
    slots = asyncio.Semaphore(concurrency)
    snaps: list[SignalSnapshot] = []
    errors: dict[str, str] = {}

    async def one(t: ReplicaTarget) -> None:
        async with slots:
            try:
                snaps.append(await read_replica(client, t, timeout_s=timeout_s, clock=clock))
            except TimeoutError:
                errors[t.name] = f"/metrics did not answer within {timeout_s:g}s"
            except httpx.HTTPError as exc:
                errors[t.name] = f"/metrics: {type(exc).__name__}: {exc}"

    await asyncio.gather(*(one(t) for t in targets))
    return snaps, errors
