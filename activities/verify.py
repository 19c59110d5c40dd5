"""Verify a traffic shift the way users see it: completions through the global endpoint.

The serving region is read from `traffic.region_header`, which the regional gateway tier sets
(HAProxy `http-response set-header`, a Gateway API ResponseHeaderModifier). Nothing the inference
server itself sends is trusted for it: an answer without the header counts as unattributed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.defined import activity_methods
from drctl.config.schema import FleetConfig
from drctl.models.activity_io import VerifyInput, VerifyResult
from drctl.providers import completions
from drctl.providers.auth import AuthConfigError, auth_headers

# A few requests in flight at once: fast enough to verify in about a second, small enough not
# to be a load test against a fleet that just lost a region.
_CONCURRENCY = 4
_HEARTBEAT_S = 1.0


class VerifyActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.url = completions.url_of(cfg.traffic.global_endpoint)
        self.model = cfg.workload.model
        self.cfg = cfg
        self.region_header = cfg.traffic.region_header

    @activity.defn(name="verify_global")
    async def verify_global(self, inp: VerifyInput) -> VerifyResult:
        """Send `requests` 1-token completions; count successes per serving region and errors."""
        try:
            headers = auth_headers(self.cfg)
        except AuthConfigError as exc:
            raise ApplicationError(str(exc), type="AuthConfigError", non_retryable=True) from None
        result = VerifyResult(total=0, ok=0, errors=0, region_header=self.region_header)
        sem = asyncio.Semaphore(_CONCURRENCY)

        async def one(client: httpx.AsyncClient) -> None:
            async with sem:
                answer = await completions.complete(
                    client, self.url, self.model, "drctl verify", self.region_header
                )
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

        async def alive() -> None:
            # A worker that died mid-batch is noticed at the heartbeat timeout, not at the end of
            # start-to-close, so the retried attempt still fits in the verify deadline.
            while True:
                activity.heartbeat(result.ok + result.errors)
                await asyncio.sleep(_HEARTBEAT_S)

        limits = completions.fresh_connections(_CONCURRENCY)
        async with httpx.AsyncClient(timeout=inp.request_timeout_s, limits=limits, headers=headers) as client:
            beat = asyncio.create_task(alive())
            tasks = [asyncio.create_task(one(client)) for _ in range(inp.requests)]
            done, pending = await asyncio.wait(tasks, timeout=inp.timeout_s)
            beat.cancel()
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
                result.errors += len(pending)
                result.error_samples.append(f"{len(pending)} request(s) unfinished after {inp.timeout_s:g}s")
        result.total = inp.requests
        return result


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(VerifyActivities(cfg))
