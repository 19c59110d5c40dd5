"""Measure a track's replicas with bounded synthetic inference traffic: warm-up and analysis.

Requests go straight to the replicas of one track (never through the gateway), so a canary at 5 %
weight still yields as many samples as stable in the same window, and warm-up traffic reaches a
track before it carries any user traffic. TTFT is the time to the first streamed token, measured
by the client, the way a user experiences it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from drctl.models.analysis import TrackSample
from drctl.providers.completions import time_to_first_token

PROMPTS = (
    "Summarise the benefits of blue-green deployments in one sentence.",
    "Translate 'the fleet is healthy' into French.",
    "List three prime numbers.",
    "What is the capital of Portugal?",
)
MAX_CONCURRENCY = 4


def percentile(values: list[float], pct: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Completions:
    """How each synthetic request is made: the served model, its timeout, and the headers (the
    bearer token of a server run with `--api-key`)."""

    model: str
    timeout_s: float
    headers: dict[str, str] | None = None


async def run_requests(
    urls: list[str],
    how: Completions,
    count: int,
    spread_s: float,
    on_progress: Callable[[int], None] | None = None,
) -> list[float | None]:
    """`count` requests round-robin over `urls`, started evenly over `spread_s` seconds.

    Bounded in count, concurrency and time: each request has `how.timeout_s`, and nothing starts
    after spread_s.
    """
    if not urls or count <= 0:
        return []
    results: list[float | None] = []
    sem = asyncio.Semaphore(MAX_CONCURRENCY)
    gap = spread_s / count if spread_s > 0 else 0.0
    limits = httpx.Limits(max_connections=MAX_CONCURRENCY * 2, max_keepalive_connections=MAX_CONCURRENCY)
    async with httpx.AsyncClient(timeout=how.timeout_s, limits=limits, headers=how.headers) as http:

        async def fire(i: int) -> None:
            async with sem:
                url, prompt = urls[i % len(urls)], PROMPTS[i % len(PROMPTS)]
                results.append(await time_to_first_token(http, url, how.model, prompt))
            if on_progress:
                on_progress(len(results))

        tasks = []
        for i in range(count):
            tasks.append(asyncio.create_task(fire(i)))
            if gap:
                await asyncio.sleep(gap)
        await asyncio.gather(*tasks)
    return results


def summarise(name: str, results: list[float | None]) -> TrackSample:
    ttfts = [r for r in results if r is not None]
    return TrackSample(
        track=name,
        requests=len(results),
        errors=len(results) - len(ttfts),
        ttft_p50_ms=percentile(ttfts, 50),
        ttft_p99_ms=percentile(ttfts, 99),
    )


async def measure_pair(
    candidate: tuple[str, list[str]],
    baseline: tuple[str, list[str]],
    how: Completions,
    window_s: float,
    per_track: int,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[TrackSample, TrackSample]:
    """Both tracks in the same window, so a shared slowdown (the node, the network) cancels out."""
    cand, base = await asyncio.gather(
        run_requests(candidate[1], how, per_track, window_s, on_progress),
        run_requests(baseline[1], how, per_track, window_s),
    )
    return summarise(candidate[0], cand), summarise(baseline[0], base)
