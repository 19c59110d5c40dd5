"""The inference client drctl itself sends completions with: verify, drill load, drill probes, analysis.

One place says what a request is (a 1-token completion, or a 2-token stream for time to first
token), what counts as served (HTTP 200 with a JSON answer, or a stream that reached `[DONE]`), and
which region served it: the header the regional gateway tier sets (`traffic.region_header`), never
anything the inference server sends itself. Every request is bounded by the client's timeout.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx

from drctl.providers import sse

PATH = "/v1/completions"


@dataclass(frozen=True)
class Answer:
    """One completion as a user saw it."""

    ok: bool
    status: int | None  # None: no HTTP answer at all
    region: str | None  # the region header; None when absent or the request failed
    latency_ms: float
    error: str | None = None  # "ExceptionType: message", for error samples in reports


def url_of(base: str) -> str:
    return base.rstrip("/") + PATH


def one_token(model: str, prompt: str) -> dict[str, object]:
    return {"model": model, "prompt": prompt, "max_tokens": 1}


def fresh_connections(max_connections: int) -> httpx.Limits:
    """No keep-alive: every request is a new connection, so the global tier balances each one with
    the weights in force now, as a new user's request would be."""
    return httpx.Limits(max_connections=max_connections, max_keepalive_connections=0)


def _answer(resp: httpx.Response, region_header: str, started: float) -> Answer:
    latency = round((time.monotonic() - started) * 1000, 1)
    if resp.status_code != 200:
        return Answer(False, resp.status_code, None, latency, f"HTTPStatusError: HTTP {resp.status_code}")
    try:
        resp.json()
    except ValueError as exc:  # a 200 that is not a completion (an HTML error page) is not served
        return Answer(False, 200, None, latency, f"{type(exc).__name__}: {str(exc)[:200]}")
    return Answer(True, 200, resp.headers.get(region_header) or None, latency)


def _failed(exc: Exception, started: float) -> Answer:
    latency = round((time.monotonic() - started) * 1000, 1)
    return Answer(False, None, None, latency, f"{type(exc).__name__}: {str(exc)[:200]}")


async def complete(
    client: httpx.AsyncClient, url: str, model: str, prompt: str, region_header: str
) -> Answer:
    """One 1-token completion to `url` (a full completions URL, see `url_of`)."""
    started = time.monotonic()
    try:
        resp = await client.post(url, json=one_token(model, prompt))
    except httpx.HTTPError as exc:
        return _failed(exc, started)
    return _answer(resp, region_header, started)


def complete_sync(client: httpx.Client, url: str, model: str, prompt: str, region_header: str) -> Answer:
    """`complete` for callers on a plain thread (Chaos Toolkit probes run synchronously)."""
    started = time.monotonic()
    try:
        resp = client.post(url, json=one_token(model, prompt))
    except httpx.HTTPError as exc:
        return _failed(exc, started)
    return _answer(resp, region_header, started)


async def time_to_first_token(client: httpx.AsyncClient, base: str, model: str, prompt: str) -> float | None:
    """TTFT in ms of one streamed completion, measured by the client as a user sees it; None when it
    failed, including a stream cut before `[DONE]` (the user saw a broken answer)."""
    body = {"model": model, "prompt": prompt, "max_tokens": 2, "stream": True}
    start = time.monotonic()
    try:
        async with client.stream("POST", url_of(base), json=body) as resp:
            if resp.status_code != 200:
                await resp.aread()
                return None
            ttft: float | None = None
            async for data in sse.data_events(resp.aiter_lines()):
                if sse.is_done(data):
                    return ttft
                if ttft is None:
                    ttft = (time.monotonic() - start) * 1000
            return None
    except httpx.HTTPError:
        return None
