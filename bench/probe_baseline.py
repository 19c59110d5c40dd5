"""BASELINE: the prober as it was before issue 12, for bench/probe_scale.py.

The bench measures the old and the new prober side by side in one run; not product code. What
issue 12 changed is kept here as it was: one httpx client per round with no connection reuse,
one deadline per target that runs while it queues for the concurrency bound, a completion for
every replica in every round, and the full /metrics parse. What it did not change (the verdicts,
the SSE parse, the model-list check) is the product's own code, imported, so the two cannot drift
apart where they are meant to agree.

Each target answers /health, /v1/models, a 1-token streamed completion (time to first token is
measured to the first SSE data chunk) and /metrics where present. The prober never raises for an
unhealthy target: every failure becomes a result with an error class.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from drctl.config.schema import FleetConfig, RegionConfig
from drctl.models.health import ProbeStatus, RegionProbe, TargetProbe
from drctl.providers import probe as product
from drctl.providers import prom
from drctl.providers.probe import ProbeTarget
from drctl.providers.probe_http import ErrorTable, Failed, call, check, first_data_chunk, model_listed, short
from drctl.providers.replicas import ReplicaEndpoint, ReplicaSource

_HTTPX_ERRORS: ErrorTable = (
    (httpx.TimeoutException, "timeout"),
    ((httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError), "connect"),
    (httpx.HTTPError, "bad_response"),
)


class InferenceProber(product.InferenceProber):
    """The old prober: the product's verdicts over the old request machinery (httpx, no sampling).

    Its gateway verdict is the old one: a DEGRADED gateway is a DEGRADED region, whatever the
    replicas say.

    Args:
        cfg: the fleet config (health thresholds, model name, regions).
        replica_source: lists a region's replicas; default: the Kubernetes EndpointSlices of the
            track Services.
        gateway_completions: completions sent through the gateway per probe.
    """

    excuse_failing_replicas = False

    def __init__(
        self, cfg: FleetConfig, replica_source: ReplicaSource | None = None, gateway_completions: int = 3
    ) -> None:
        super().__init__(cfg, replica_source, gateway_completions)
        # One target: /health, then models, metrics and completions in parallel, plus one more
        # timeout's worth of waiting for a concurrency slot.
        self.target_budget_s = 2 * self.timeout_s + self.completion_timeout_s

    @property
    def max_duration_s(self) -> float:
        """Upper bound of one probe_region call: listing the replicas, then every target in parallel."""
        return self.timeout_s + self.target_budget_s

    async def _round(self, regions: list[RegionConfig], headers: dict[str, str]) -> list[RegionProbe]:
        sem = asyncio.Semaphore(self.health.probe_concurrency)
        limits = httpx.Limits(max_connections=self.health.probe_concurrency * 2, max_keepalive_connections=0)
        # A fresh client per round: no pooled connection can hide that a server went away.
        async with httpx.AsyncClient(
            timeout=self.completion_timeout_s, limits=limits, headers=headers
        ) as client:

            def probe(name: str, url: str, completions: int, gateway: bool = False) -> Awaitable[TargetProbe]:
                # The old prober judged a gateway's /health as any target's: a 5xx was DOWN.
                return self._old_bounded(name, url, client, sem, completions)

            return list(await asyncio.gather(*(self._region(probe, r) for r in regions)))

    async def _replicas(
        self, probe: ProbeTarget, region: RegionConfig, endpoints: list[ReplicaEndpoint], started: float
    ) -> tuple[list[TargetProbe], str | None]:
        """Every replica, each sent a completion, however long that takes."""
        return list(await asyncio.gather(*(probe(e.name, e.url, 1) for e in endpoints))), None

    # --- one target ------------------------------------------------------------------------------

    async def _old_bounded(
        self, name: str, url: str, client: httpx.AsyncClient, sem: asyncio.Semaphore, completions: int
    ) -> TargetProbe:
        base = url.rstrip("/")
        try:
            return await asyncio.wait_for(
                self._old_target(name, base, client, sem, completions), self.target_budget_s
            )
        except TimeoutError:
            return TargetProbe(
                target=name,
                url=base,
                status=ProbeStatus.DOWN,
                error_class="timeout",
                error=f"no complete answer within {self.target_budget_s:g}s",
            )
        except Exception as exc:  # noqa: BLE001 - a probe reports, it never raises (e.g. a malformed URL)
            return TargetProbe(
                target=name, url=base, status=ProbeStatus.DOWN, error_class="probe_error", error=short(exc)
            )

    async def _call(
        self, sem: asyncio.Semaphore, timeout_s: float, fn: Callable[[], Awaitable[Any]]
    ) -> tuple[Any, float]:
        """Run one request under the concurrency bound and a hard deadline; map every failure."""
        async with sem:  # the old bound is per request, and the deadline starts once it is held
            return await call(timeout_s, fn, _HTTPX_ERRORS)

    @staticmethod
    def _check(resp: httpx.Response) -> httpx.Response:
        check(resp.status_code, resp.request.url.path)
        return resp

    async def _old_target(
        self, name: str, base: str, client: httpx.AsyncClient, sem: asyncio.Semaphore, completions: int
    ) -> TargetProbe:
        probe = TargetProbe(target=name, url=base, status=ProbeStatus.HEALTHY)
        try:
            _, probe.latency_ms = await self._call(
                sem, self.timeout_s, lambda: self._get(client, f"{base}/health")
            )
        except Failed as f:
            status = ProbeStatus.AUTH if f.cls == "auth" else ProbeStatus.DOWN
            return probe.model_copy(update={"status": status, "error_class": f.cls, "error": str(f)})
        probe.latency_ms = round(probe.latency_ms, 2)
        models, metrics, ttfts = await asyncio.gather(
            self._models(client, sem, base),
            self._metrics(client, sem, base),
            asyncio.gather(*(self._completion(client, sem, base) for _ in range(completions))),
        )
        self._read_metrics(probe, metrics)
        return self._classify(probe, models, ttfts)

    async def _get(self, client: httpx.AsyncClient, url: str) -> httpx.Response:
        return self._check(await client.get(url))

    async def _models(self, client: httpx.AsyncClient, sem: asyncio.Semaphore, base: str) -> Failed | None:
        try:
            resp, _ = await self._call(sem, self.timeout_s, lambda: self._get(client, f"{base}/v1/models"))
        except Failed as f:
            return f
        return model_listed(resp.text, self.model)

    async def _metrics(
        self, client: httpx.AsyncClient, sem: asyncio.Semaphore, base: str
    ) -> dict[str, float] | None:
        # /metrics is optional (a gateway usually has none): its absence or failure is no verdict.
        try:
            resp, _ = await self._call(sem, self.timeout_s, lambda: client.get(f"{base}/metrics"))
        except Failed:
            return None
        return prom.parse_samples(resp.text) if resp.status_code == 200 else None

    async def _completion(
        self, client: httpx.AsyncClient, sem: asyncio.Semaphore, base: str
    ) -> float | Failed:
        body = {"model": self.model, "prompt": "ping", "max_tokens": 1, "stream": True, "temperature": 0}

        async def first_chunk() -> float:
            t0 = time.perf_counter()
            async with client.stream("POST", f"{base}/v1/completions", json=body) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    self._check(resp)
                await first_data_chunk(resp.aiter_lines())
                return (time.perf_counter() - t0) * 1000

        try:
            ttft, _ = await self._call(sem, self.completion_timeout_s, first_chunk)
        except Failed as f:
            return f
        return float(ttft)
