"""The prober's HTTP requests: one aiohttp request each, a hard deadline, every failure classified."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any, NamedTuple

import aiohttp

from drctl.providers import prom, sse

_CLOSE = {"Connection": "close"}


class Reply(NamedTuple):
    status: int
    text: str


class Failed(Exception):
    """One probe request failed; `cls` is the TargetProbe.error_class."""

    def __init__(self, cls: str, message: str) -> None:
        super().__init__(message)
        self.cls = cls


def short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# A client's exceptions and the error class each one is, first match wins. None: re-raised, so the
# prober reports it as probe_error.
ErrorTable = tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str | None], ...]

AIOHTTP_ERRORS: ErrorTable = (
    (aiohttp.InvalidURL, None),  # our config, not the target's health
    ((aiohttp.ClientConnectionError, aiohttp.ClientPayloadError), "connect"),
    (aiohttp.ClientError, "bad_response"),
)


async def call(
    timeout_s: float, fn: Callable[[], Awaitable[Any]], errors: ErrorTable = AIOHTTP_ERRORS
) -> tuple[Any, float]:
    """Run one request under a hard deadline; map every failure through `errors`."""
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            result = await fn()
    except Failed:
        raise
    except Exception as exc:
        # TimeoutError first: aiohttp's own timeouts are TimeoutErrors as well as client errors.
        cls = (
            "timeout"
            if isinstance(exc, TimeoutError)
            else next((c for t, c in errors if isinstance(exc, t)), None)
        )
        if cls is None:
            raise
        raise Failed(cls, f"no answer within {timeout_s:g}s" if cls == "timeout" else short(exc)) from exc
    return result, (time.perf_counter() - t0) * 1000


def check(status: int, path: str) -> None:
    if status in (401, 403):
        raise Failed("auth", f"HTTP {status} from {path}: credentials refused (check workload.auth)")
    if status >= 500:
        raise Failed("http_5xx", f"HTTP {status} from {path}")
    if status >= 400:
        raise Failed("http_4xx", f"HTTP {status} from {path}")


async def get(client: aiohttp.ClientSession, url: str, keep: bool = False, strict: bool = True) -> Reply:
    # A target's later requests close their connection: the next round is a new session
    # anyway, and thousands of idle keep-alive sockets would only hold server slots.
    async with client.get(url, headers=None if keep else _CLOSE) as resp:
        text = await resp.text(errors="replace")
        if strict:
            check(resp.status, resp.url.path)
        return Reply(resp.status, text)


async def models(client: aiohttp.ClientSession, base: str, timeout_s: float, model: str) -> Failed | None:
    try:
        resp, _ = await call(timeout_s, lambda: get(client, f"{base}/v1/models"))
    except Failed as f:
        return f
    return model_listed(resp.text, model)


def model_listed(body: str, model: str) -> Failed | None:
    """Why a /v1/models answer `body` does not list `model`, or None when it does."""
    try:
        ids = [m.get("id") for m in json.loads(body).get("data", [])]
    except (ValueError, AttributeError, TypeError) as exc:
        return Failed("bad_response", f"/v1/models is not an OpenAI model list: {short(exc)}")
    if model not in ids:
        return Failed("model_missing", f"model {model!r} not served; /v1/models lists {ids}")
    return None


async def metrics(client: aiohttp.ClientSession, base: str, timeout_s: float) -> dict[str, float] | None:
    # /metrics is optional (a gateway usually has none): its absence or failure is no verdict.
    try:
        resp, _ = await call(timeout_s, lambda: get(client, f"{base}/metrics", strict=False))
    except Failed:
        return None
    if resp.status != 200:
        return None
    # Only the gauges and one counter are read here; skipping the histogram lines before the
    # regex parse is most of the prober's CPU at thousands of replicas.
    wanted = "\n".join(ln for ln in resp.text.splitlines() if ln.startswith(prom.VLLM_PROBED))
    return prom.vllm_gauges(wanted)


async def first_data_chunk(lines: AsyncIterable[str]) -> None:
    """Read an SSE stream up to its first completion chunk; a malformed or missing one is Failed."""
    async for payload in sse.data_events(lines):
        if sse.is_done(payload):
            break
        try:
            chunk = json.loads(payload)
        except ValueError as exc:
            raise Failed("bad_response", f"SSE chunk is not JSON: {payload[:80]!r}") from exc
        if not isinstance(chunk, dict) or "choices" not in chunk:
            raise Failed("bad_response", f"SSE chunk without choices: {payload[:80]!r}")
        return
    raise Failed("bad_response", "completion stream ended without a data chunk")


async def completion(
    client: aiohttp.ClientSession, base: str, timeout_s: float, model: str, slow_after_s: float | None = None
) -> float | Failed:
    """Time to the first SSE data chunk of a 1-token completion, ms, or why it failed.

    With `slow_after_s`, no first chunk by then is Failed("slow") at once: the answer would be slow
    whatever it turned out to be, and waiting for it only delays the verdict.
    """
    body = {"model": model, "prompt": "ping", "max_tokens": 1, "stream": True, "temperature": 0}

    async def first_chunk() -> float:
        t0 = time.perf_counter()
        async with client.post(f"{base}/v1/completions", json=body, headers=_CLOSE) as resp:
            if resp.status >= 400:
                await resp.read()
                check(resp.status, resp.url.path)
            await first_data_chunk(sse.aiohttp_lines(resp.content))
            return (time.perf_counter() - t0) * 1000

    deadline = timeout_s if slow_after_s is None else min(timeout_s, slow_after_s)
    try:
        ttft, _ = await call(deadline, first_chunk)
    except Failed as f:
        if f.cls == "timeout" and slow_after_s is not None and deadline == slow_after_s:
            return Failed("slow", f"no first token within {slow_after_s * 1000:.0f}ms")
        return f
    return float(ttft)
