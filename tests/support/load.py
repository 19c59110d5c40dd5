"""A bounded load generator: `streams` concurrent streaming completions through one endpoint (loopback).

Bounded in time (`max_s`) and count (`max_requests`): a test that forgets to stop it still ends.
Each stream sends one request after another, so the server sees `streams` requests in flight, which
is what vLLM's num_requests_running counts.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx

from tests.support.workers import served_key


@dataclass
class Load:
    done: Counter[str] = field(default_factory=Counter)  # region (X-Fleetsim-Region) or error -> requests
    stop: asyncio.Event = field(default_factory=asyncio.Event)


@asynccontextmanager
async def bounded_load(
    url: str,
    model: str,
    *,
    streams: int,
    max_tokens: int = 200,
    stream: bool = True,
    max_s: float = 180.0,
    max_requests: int = 20_000,
) -> AsyncIterator[Load]:
    """Run the load while the block runs (never longer than `max_s`, never more than `max_requests`).

    `stream=False` holds each request in flight just as long for almost no client work (one response
    per request, not one chunk per token): the in-flight count then stays at `streams` on a loaded
    machine, where a CPU-starved streaming client falls behind.
    """
    assert url.startswith("http://127.0.0.1"), "tests send traffic only to loopback"
    load = Load()
    deadline = time.monotonic() + max_s
    limits = httpx.Limits(max_connections=streams, max_keepalive_connections=streams)
    body = {"model": model, "prompt": "x", "max_tokens": max_tokens, "stream": stream}

    async def one(client: httpx.AsyncClient) -> None:
        while (
            not load.stop.is_set() and time.monotonic() < deadline and sum(load.done.values()) < max_requests
        ):
            try:
                async with client.stream("POST", url + "/v1/completions", json=body) as r:
                    async for _ in r.aiter_bytes():
                        pass
                key = served_key(r)
            except httpx.HTTPError as exc:
                key = type(exc).__name__
                await asyncio.sleep(0.05)  # a refused connection must not spin
            load.done[key] += 1

    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        tasks = [asyncio.create_task(one(client)) for _ in range(streams)]
        try:
            yield load
        finally:
            load.stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)
