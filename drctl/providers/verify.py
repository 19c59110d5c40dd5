"""Verify a traffic shift the way users see it: 1-token completions through the global endpoint.

The serving region is read from `traffic.region_header`, which the regional gateway tier sets
(HAProxy `http-response set-header`, a Gateway API ResponseHeaderModifier). Nothing the inference
server itself sends is trusted for it: an answer without the header counts as unattributed. Used by
the Failover's `verify_global` activity and by the break-glass failover, which has no Temporal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import httpx

from drctl.config.schema import FleetConfig
from drctl.models.activity_io import VerifyInput, VerifyResult
from drctl.providers import completions
from drctl.providers.auth import auth_headers

# A few requests in flight at once: fast enough to verify in about a second, small enough not
# to be a load test against a fleet that just lost a region.
CONCURRENCY = 4


async def verify_global(
    cfg: FleetConfig,
    inp: VerifyInput,
    alive: Callable[[VerifyResult], Coroutine[Any, Any, None]] | None = None,
) -> VerifyResult:
    """Send `inp.requests` completions, `CONCURRENCY` at a time, within `inp.timeout_s`; count
    successes per serving region and errors. `alive` runs beside them (an activity's heartbeat).
    Raises AuthConfigError when the configured credentials cannot be read."""
    url, model, header = (
        completions.url_of(cfg.traffic.global_endpoint),
        cfg.workload.model,
        cfg.traffic.region_header,
    )
    headers = auth_headers(cfg)
    result = VerifyResult(total=0, ok=0, errors=0, region_header=header)
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(client: httpx.AsyncClient) -> None:
        async with sem:
            answer = await completions.complete(client, url, model, "drctl verify", header)
        if answer.status in (401, 403):
            result.auth_rejected += 1
        if not answer.ok:
            result.errors += 1
            if len(result.error_samples) < 5 and answer.error:
                result.error_samples.append(answer.error)
            return
        result.ok += 1
        if answer.region:
            result.by_region[answer.region] = result.by_region.get(answer.region, 0) + 1
        else:
            result.unattributed += 1

    limits = completions.fresh_connections(CONCURRENCY)
    async with httpx.AsyncClient(timeout=inp.request_timeout_s, limits=limits, headers=headers) as client:
        beat = asyncio.create_task(alive(result)) if alive is not None else None
        tasks = [asyncio.create_task(one(client)) for _ in range(inp.requests)]
        _, pending = await asyncio.wait(tasks, timeout=inp.timeout_s)
        if beat is not None:
            beat.cancel()
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            result.errors += len(pending)
            result.error_samples.append(f"{len(pending)} request(s) unfinished after {inp.timeout_s:g}s")
    result.total = inp.requests
    return result
