"""Every replica's vLLM `/metrics` as passive signals: request and 5xx counters, TTFT and e2e histograms.

Counts come from `http_requests_total{handler,method,status}`, which vLLM's API server exposes
through prometheus-fastapi-instrumentator with its defaults (vllm/entrypoints/serve/instrumentator/
metrics.py: status grouped as "2xx".."5xx"), over the generation handlers only (a probe of
/v1/models is not user traffic). A server without that counter still exposes
`vllm:request_success_total`; requests are then the successes and errors are unknown (None, never
0): the SLO watch then cannot call the objective met, and the passive signals judge errors from the
gateway's counters alone. `/metrics` needs no API key in vLLM.

Reads run concurrently on one pooled client: each replica's deadline starts when its request
starts, not while it waits for a free slot, so a long queue never looks like a slow replica.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import httpx

from drctl.models.passive import SignalSnapshot
from drctl.providers.prom import (
    HTTP_REQUESTS,
    VLLM_E2E,
    VLLM_RUNNING,
    VLLM_SUCCESS,
    VLLM_TTFT,
    VLLM_WAITING,
    Series,
    histogram,
    parse_series,
    total,
)

T = TypeVar("T")
_HTTP_DECLARED = re.compile(rf"^# TYPE {HTTP_REQUESTS} counter", re.MULTILINE)
GENERATION_HANDLERS = frozenset({"/v1/completions", "/v1/chat/completions", "/v1/responses"})


@dataclass(frozen=True)
class ReplicaTarget:
    region: str
    name: str
    url: str  # base URL; /metrics is appended


def counts_http(text: str) -> bool:
    """The page declares http_requests_total. A counter with labels has no sample before its first
    request, but prometheus_client writes its `# TYPE` line from the start: declared and empty is 0
    requests, undeclared is a server that counts none (errors unknown)."""
    return _HTTP_DECLARED.search(text) is not None


def replica_snapshot(text: str, *, region: str, source: str, taken_at: float) -> SignalSnapshot:
    """A snapshot from one /metrics page (Prometheus text format)."""
    series = parse_series(text)
    return series_snapshot(series, region=region, source=source, taken_at=taken_at, http=counts_http(text))


def series_snapshot(
    series: Series, *, region: str, source: str, taken_at: float, http: bool = False
) -> SignalSnapshot:
    """A snapshot from a /metrics page already parsed (`parse_series`); `http`: the page declares
    http_requests_total (`counts_http`), so no sample of it means no request yet."""
    rows = [
        (labels, v)
        for n, labels, v in series
        if n == HTTP_REQUESTS and labels.get("handler") in GENERATION_HANDLERS
    ]
    errors: float | None
    if rows or http:
        requests = sum(v for _, v in rows)
        errors = sum(v for labels, v in rows if labels.get("status", "").startswith("5"))
    else:
        # No http_requests_total (vLLM before PR 15657, v0.6.3 among them): the successes are what is
        # known to have been answered, and the failures are unknown; 0 would hide every 5xx.
        requests, errors = total(series, VLLM_SUCCESS) or 0.0, None
    return SignalSnapshot(
        source=source,
        kind="replica",
        region=region,
        taken_at=taken_at,
        requests_total=requests,
        errors_total=errors,
        ttft=histogram(series, VLLM_TTFT),
        e2e=histogram(series, VLLM_E2E),
        queue=(waiting := total(series, VLLM_WAITING)),
        in_flight=None if (running := total(series, VLLM_RUNNING)) is None else running + (waiting or 0.0),
    )


async def read_replica(
    client: httpx.AsyncClient,
    target: ReplicaTarget,
    *,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> SignalSnapshot:
    """Read one replica's /metrics; raises httpx.HTTPError (or TimeoutError) when it cannot be read."""
    text = await read_page(client, target, timeout_s=timeout_s)
    return replica_snapshot(text, region=target.region, source=target.name, taken_at=clock())


def pooled_client() -> httpx.AsyncClient:
    """One client for every replica a reader reads: reads reuse connections, and a dead server
    still fails its next read, so pooling hides nothing. No proxy from the environment."""
    return httpx.AsyncClient(trust_env=False, limits=httpx.Limits(max_keepalive_connections=256))


async def read_page(client: httpx.AsyncClient, target: ReplicaTarget, *, timeout_s: float) -> str:
    """One replica's /metrics text, within `timeout_s` from the request's start."""
    async with asyncio.timeout(timeout_s):
        resp = await client.get(f"{target.url.rstrip('/')}/metrics", timeout=timeout_s)
    resp.raise_for_status()
    return resp.text


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

    async def one(t: ReplicaTarget) -> SignalSnapshot:
        return await read_replica(client, t, timeout_s=timeout_s, clock=clock)

    return await read_each(targets, one, timeout_s=timeout_s, concurrency=concurrency)


async def read_each(
    targets: list[ReplicaTarget],
    read: Callable[[ReplicaTarget], Awaitable[T]],
    *,
    timeout_s: float,
    concurrency: int = 64,
) -> tuple[list[T], dict[str, str]]:
    """`read` every target, at most `concurrency` at a time; the results, and why each failed one failed.

    Each read's deadline starts when its request does (inside its slot), never while it queues.
    """
    slots = asyncio.Semaphore(concurrency)
    out: list[T] = []
    errors: dict[str, str] = {}

    async def one(t: ReplicaTarget) -> None:
        async with slots:
            try:
                out.append(await read(t))
            except TimeoutError:
                errors[t.name] = f"/metrics did not answer within {timeout_s:g}s"
            except httpx.HTTPError as exc:
                errors[t.name] = f"/metrics: {type(exc).__name__}: {exc}"

    await asyncio.gather(*(one(t) for t in targets))
    return out, errors


# vLLM exports no max_num_seqs (vllm/v1/metrics/loggers.py: cache_config_info carries the KV
# cache's settings only). A server, or an exporter beside it, that adds a max_num_seqs label to a
# *_config_info gauge is read; otherwise the capacity model learns the ceiling from the queue.
CONFIG_INFO_SUFFIX = "_config_info"


def replica_gauges(series: Series) -> tuple[float, float, int | None]:
    """(running, waiting, max_num_seqs) of one /metrics page; absent gauges read 0, max_num_seqs None."""
    seqs = []
    for name, labels, _ in series:
        if name.startswith("vllm:") and name.endswith(CONFIG_INFO_SUFFIX) and "max_num_seqs" in labels:
            try:
                seqs.append(int(labels["max_num_seqs"]))
            except ValueError:
                continue
    running = total(series, VLLM_RUNNING) or 0.0
    waiting = total(series, VLLM_WAITING) or 0.0
    return running, waiting, min((n for n in seqs if n > 0), default=None)
