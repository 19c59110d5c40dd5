"""BASELINE: the prober as it was before issue 12 (a copy of drctl/providers/probe.py), for bench/probe_scale.py.

Kept verbatim so the bench measures the old and the new prober side by side in one run; not product code.
It is a frozen baseline: it stays duplicated with drctl/providers/probe*.py on purpose (`duplicates`
lists those pairs), and is never refactored, deduplicated or fixed, or it would no longer measure
the prober as it was.


Each target answers /health, /v1/models, a 1-token streamed completion (time to first token is
measured to the first SSE data chunk) and /metrics where present. The prober never raises for an
unhealthy target: every failure becomes a result with an error class, because the monitor needs
to tell "down" from "slow" from "partly failing", not catch exceptions.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from drctl.config.schema import FleetConfig, RegionConfig
from drctl.models.health import ProbeStatus, RegionProbe, TargetProbe
from drctl.providers import prom
from drctl.providers.auth import AuthConfigError, auth_headers
from drctl.providers.replicas import KubernetesReplicaSource, ReplicaEndpoint, ReplicaSource


class _Failed(Exception):
    """One probe request failed; `cls` is the TargetProbe.error_class."""

    def __init__(self, cls: str, message: str) -> None:
        super().__init__(message)
        self.cls = cls


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class InferenceProber:
    """Probes a region the way a user's request meets it: gateway and replicas, inference-aware.

    Args:
        cfg: the fleet config (health thresholds, model name, regions).
        replica_source: lists a region's replicas; default: the Kubernetes EndpointSlices of the
            track Services.
        gateway_completions: completions sent through the gateway per probe. More than one, so a
            gateway that fails half its requests reads as DEGRADED rather than passing by luck.
    """

    def __init__(
        self, cfg: FleetConfig, replica_source: ReplicaSource | None = None, gateway_completions: int = 3
    ) -> None:
        self.cfg = cfg
        self.health = cfg.health
        self.model = cfg.workload.model
        self.replica_source = replica_source or KubernetesReplicaSource(cfg)
        self.gateway_completions = max(1, gateway_completions)
        self.timeout_s = self.health.probe_timeout_s
        # A completion may legitimately take longer than a /health answer: without the extra
        # allowance a TTFT just above the degraded threshold would read as a timeout (DOWN)
        # instead of slow (DEGRADED).
        self.completion_timeout_s = self.timeout_s + self.health.ttft_degraded_ms / 1000.0

        # One target: /health, then models, metrics and completions in parallel, plus one more
        # timeout's worth of waiting for a concurrency slot.
        self.target_budget_s = 2 * self.timeout_s + self.completion_timeout_s

    @property
    def max_duration_s(self) -> float:
        """Upper bound of one probe_region call: listing the replicas, then every target in parallel."""
        return self.timeout_s + self.target_budget_s

    async def probe_region(self, region: str) -> RegionProbe:
        return (await self.probe_regions([region]))[0]

    async def probe_regions(self, regions: list[str]) -> list[RegionProbe]:
        """Probe several regions at once, all sharing one concurrency bound."""
        try:
            headers = auth_headers(self.cfg)
        except AuthConfigError as exc:
            # An unreadable token is drctl's own config error: it says nothing about the regions.
            return [self._unprobed(self.cfg.region(r), str(exc)) for r in regions]
        sem = asyncio.Semaphore(self.health.probe_concurrency)
        limits = httpx.Limits(max_connections=self.health.probe_concurrency * 2, max_keepalive_connections=0)
        # A fresh client per round: no pooled connection can hide that a server went away.
        async with httpx.AsyncClient(
            timeout=self.completion_timeout_s, limits=limits, headers=headers
        ) as client:
            return list(
                await asyncio.gather(*(self._region(client, sem, self.cfg.region(r)) for r in regions))
            )

    @staticmethod
    def _unprobed(region: RegionConfig, why: str) -> RegionProbe:
        gateway = TargetProbe(
            target="gateway", url=region.gateway_url, status=ProbeStatus.AUTH, error_class="auth", error=why
        )
        return RegionProbe(
            region=region.name,
            status=ProbeStatus.AUTH,
            reason=why,
            gateway=gateway,
            probed_at=datetime.now(UTC).isoformat(),
        )

    # --- one region ------------------------------------------------------------------------------

    async def _region(
        self, client: httpx.AsyncClient, sem: asyncio.Semaphore, region: RegionConfig
    ) -> RegionProbe:
        started = time.monotonic()
        source_error: str | None = None

        async def listed() -> list[ReplicaEndpoint]:
            nonlocal source_error
            try:
                return await asyncio.wait_for(self.replica_source.replicas(region), self.timeout_s)
            except Exception as exc:  # the listing is evidence, not a verdict: judge from the gateway
                source_error = _short(exc)
                return []

        gw_task = asyncio.ensure_future(
            self._bounded("gateway", region.gateway_url, client, sem, self.gateway_completions)
        )
        endpoints = await listed()
        replicas = list(
            await asyncio.gather(*(self._bounded(e.name, e.url, client, sem, 1) for e in endpoints))
        )
        gateway = await gw_task
        ttfts = [t.ttft_ms for t in [gateway, *replicas] if t.ttft_ms is not None]
        failing = [r for r in replicas if r.status != ProbeStatus.HEALTHY]
        fraction = len(failing) / len(replicas) if replicas else 0.0
        status, reason = self._judge(gateway, replicas, failing, fraction, source_error)
        return RegionProbe(
            region=region.name,
            status=status,
            reason=reason,
            gateway=gateway,
            replicas=replicas,
            failing_fraction=round(fraction, 4),
            ttft_p50_ms=round(statistics.median(ttfts), 2) if ttfts else None,
            probed_at=datetime.now(UTC).isoformat(),
            duration_ms=round((time.monotonic() - started) * 1000, 2),
        )

    def _judge(
        self,
        gateway: TargetProbe,
        replicas: list[TargetProbe],
        failing: list[TargetProbe],
        fraction: float,
        source_error: str | None,
    ) -> tuple[ProbeStatus, str]:
        if gateway.status == ProbeStatus.DOWN:
            return ProbeStatus.DOWN, f"gateway {gateway.url}: {gateway.error_class}: {gateway.error}"
        if source_error is None:
            serving = [r for r in replicas if r.status != ProbeStatus.DOWN]
            if not replicas:
                return ProbeStatus.DOWN, "no replicas registered for the region"
            if not serving:
                first = failing[0]
                return ProbeStatus.DOWN, (
                    f"no replica serving (0/{len(replicas)}); {first.target}: {first.error_class}: {first.error}"
                )
        refused = [t for t in [gateway, *replicas] if t.status == ProbeStatus.AUTH]
        if refused:
            # Answering but refusing drctl's token: its health is unknown, and it is not an outage.
            names = ", ".join(t.target for t in refused)
            return ProbeStatus.AUTH, f"credentials refused by {names}: {refused[0].error}"
        note = f" (replica list unavailable: {source_error})" if source_error else ""
        if gateway.status == ProbeStatus.DEGRADED:
            return ProbeStatus.DEGRADED, f"gateway degraded: {gateway.error}{note}"
        if fraction > self.health.error_rate_degraded:
            names = ", ".join(f"{r.target} {r.error_class or r.status.value.lower()}" for r in failing)
            return ProbeStatus.DEGRADED, f"{len(failing)}/{len(replicas)} replicas failing: {names}"
        ttft = f"{gateway.ttft_ms:.0f}ms" if gateway.ttft_ms is not None else "n/a"
        healthy = len(replicas) - len(failing)
        return ProbeStatus.HEALTHY, f"gateway TTFT {ttft}; {healthy}/{len(replicas)} replicas healthy{note}"

    # --- one target ------------------------------------------------------------------------------

    async def _bounded(
        self, name: str, url: str, client: httpx.AsyncClient, sem: asyncio.Semaphore, completions: int
    ) -> TargetProbe:
        base = url.rstrip("/")
        try:
            return await asyncio.wait_for(
                self._target(name, base, client, sem, completions), self.target_budget_s
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
                target=name, url=base, status=ProbeStatus.DOWN, error_class="probe_error", error=_short(exc)
            )

    async def _call(
        self, sem: asyncio.Semaphore, timeout_s: float, fn: Callable[[], Awaitable[Any]]
    ) -> tuple[Any, float]:
        """Run one request under the concurrency bound and a hard deadline; map every failure."""
        async with sem:
            t0 = time.perf_counter()
            try:
                async with asyncio.timeout(timeout_s):
                    result = await fn()
            except _Failed:
                raise
            except (TimeoutError, httpx.TimeoutException) as exc:
                raise _Failed("timeout", f"no answer within {timeout_s:g}s") from exc
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                raise _Failed("connect", _short(exc)) from exc
            except httpx.HTTPError as exc:
                raise _Failed("bad_response", _short(exc)) from exc
            return result, (time.perf_counter() - t0) * 1000

    @staticmethod
    def _check(resp: httpx.Response) -> httpx.Response:
        if resp.status_code in (401, 403):
            raise _Failed(
                "auth",
                f"HTTP {resp.status_code} from {resp.request.url.path}: "
                "credentials refused (check workload.auth)",
            )
        if resp.status_code >= 500:
            raise _Failed("http_5xx", f"HTTP {resp.status_code} from {resp.request.url.path}")
        if resp.status_code >= 400:
            raise _Failed("http_4xx", f"HTTP {resp.status_code} from {resp.request.url.path}")
        return resp

    async def _target(
        self, name: str, base: str, client: httpx.AsyncClient, sem: asyncio.Semaphore, completions: int
    ) -> TargetProbe:
        probe = TargetProbe(target=name, url=base, status=ProbeStatus.HEALTHY)
        try:
            _, probe.latency_ms = await self._call(
                sem, self.timeout_s, lambda: self._get(client, f"{base}/health")
            )
        except _Failed as f:
            # Dead or refusing: nothing further would answer, and waiting on it would only stretch
            # the probe of a dead region past its bound.
            status = ProbeStatus.AUTH if f.cls == "auth" else ProbeStatus.DOWN
            return probe.model_copy(update={"status": status, "error_class": f.cls, "error": str(f)})
        probe.latency_ms = round(probe.latency_ms, 2)
        models, metrics, ttfts = await asyncio.gather(
            self._models(client, sem, base),
            self._metrics(client, sem, base),
            asyncio.gather(*(self._completion(client, sem, base) for _ in range(completions))),
        )
        if metrics:
            probe.queue_depth = metrics.get(prom.VLLM_WAITING)
            probe.running = metrics.get(prom.VLLM_RUNNING)
            probe.kv_cache_usage = metrics.get(prom.VLLM_KV_CACHE)
        probe.models_ok = models is None
        failures = [r for r in [models, *ttfts] if isinstance(r, _Failed)]
        good = [t for t in ttfts if isinstance(t, float)]
        if good:
            probe.ttft_ms = round(statistics.median(good), 2)
        refused = next((f for f in failures if f.cls == "auth"), None)
        if refused is not None:
            # vLLM keeps /health open under --api-key: a 401 on /v1 is our token, not the server.
            probe.status, probe.error_class, probe.error = ProbeStatus.AUTH, refused.cls, str(refused)
        elif isinstance(models, _Failed) and models.cls == "model_missing":
            # Checked first: completions then fail too (404), and "model missing" is the cause.
            probe.status, probe.error_class, probe.error = ProbeStatus.DOWN, models.cls, str(models)
        elif not good:
            first = next(t for t in ttfts if isinstance(t, _Failed))
            probe.status, probe.error_class = ProbeStatus.DOWN, first.cls
            probe.error = f"completion failed ({len(ttfts)}/{len(ttfts)}): {first}"
        elif failures:
            probe.status, probe.error_class = ProbeStatus.DEGRADED, failures[0].cls
            probe.error = f"{len(failures)}/{len(ttfts) + 1} inference requests failed: {failures[0]}"
        elif probe.ttft_ms is not None and probe.ttft_ms > self.health.ttft_degraded_ms:
            probe.status = ProbeStatus.DEGRADED
            probe.error = f"slow TTFT {probe.ttft_ms:.0f}ms > {self.health.ttft_degraded_ms:g}ms"
        return probe

    async def _get(self, client: httpx.AsyncClient, url: str) -> httpx.Response:
        return self._check(await client.get(url))

    async def _models(self, client: httpx.AsyncClient, sem: asyncio.Semaphore, base: str) -> _Failed | None:
        try:
            resp, _ = await self._call(sem, self.timeout_s, lambda: self._get(client, f"{base}/v1/models"))
            ids = [m.get("id") for m in resp.json().get("data", [])]
        except _Failed as f:
            return f
        except (ValueError, AttributeError, TypeError) as exc:
            return _Failed("bad_response", f"/v1/models is not an OpenAI model list: {_short(exc)}")
        if self.model not in ids:
            return _Failed("model_missing", f"model {self.model!r} not served; /v1/models lists {ids}")
        return None

    async def _metrics(
        self, client: httpx.AsyncClient, sem: asyncio.Semaphore, base: str
    ) -> dict[str, float] | None:
        # /metrics is optional (a gateway usually has none): its absence or failure is no verdict.
        try:
            resp, _ = await self._call(sem, self.timeout_s, lambda: client.get(f"{base}/metrics"))
        except _Failed:
            return None
        return prom.parse_samples(resp.text) if resp.status_code == 200 else None

    async def _completion(
        self, client: httpx.AsyncClient, sem: asyncio.Semaphore, base: str
    ) -> float | _Failed:
        body = {"model": self.model, "prompt": "ping", "max_tokens": 1, "stream": True, "temperature": 0}

        async def first_chunk() -> float:
            t0 = time.perf_counter()
            async with client.stream("POST", f"{base}/v1/completions", json=body) as resp:
                if resp.status_code >= 400:
                    await resp.aread()
                    self._check(resp)
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    payload = line[5:].strip()
                    if payload == "[DONE]":
                        break
                    try:
                        chunk = json.loads(payload)
                    except ValueError as exc:
                        raise _Failed("bad_response", f"SSE chunk is not JSON: {payload[:80]!r}") from exc
                    if not isinstance(chunk, dict) or "choices" not in chunk:
                        raise _Failed("bad_response", f"SSE chunk without choices: {payload[:80]!r}")
                    return (time.perf_counter() - t0) * 1000
            raise _Failed("bad_response", "completion stream ended without a data chunk")

        try:
            ttft, _ = await self._call(sem, self.completion_timeout_s, first_chunk)
        except _Failed as f:
            return f
        return float(ttft)
