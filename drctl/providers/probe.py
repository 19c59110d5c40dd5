"""Inference-aware health probe of a region: its gateway and every replica behind it.

Every round each replica answers /health and /metrics (where present). A rotating sample of
replicas (`health.completion_sample`) and the gateway also answer /v1/models and a 1-token streamed
completion (time to first token is measured to the first SSE data chunk; none by
`health.ttft_degraded_ms` is slow at that moment, without waiting for the answer). The prober never raises
for an unhealthy target: every failure becomes a result with an error class, because the monitor
needs to tell "down" from "slow" from "partly failing", not catch exceptions.

Cost at steady state, with interval_s=10 (6 rounds a minute) and completion_sample=f:
  per replica: 6 x (2 + 2f) requests a minute, 13.2 at the default f=0.1 (24 before sampling);
  per gateway: 6 x (3 + gateway_completions) = 36 a minute with the default 3 completions.
Fast-confirm re-probes after a failure add rounds at the same per-round cost.

Connections are pooled within a round (one aiohttp session, about 4x cheaper in CPU per request
than httpx here): a replica's /health connection is reused by its later requests, which ask the
server to close it, so no idle socket per replica piles up at thousands of replicas. Each round
starts a fresh session: a server that died since the last round is refused on its first request.
Deadlines run per request once its target holds a concurrency slot, never while it queues behind
the bound, so a long queue cannot turn into a false DOWN. A region's round ends within
`round_budget_s`; replicas not reached by then are reported as not probed, not as DOWN.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time
from collections.abc import Awaitable
from datetime import UTC, datetime
from typing import Protocol

import aiohttp

from drctl.config.schema import FleetConfig, RegionConfig
from drctl.models.health import ProbeStatus, RegionProbe, TargetProbe
from drctl.providers import prom
from drctl.providers.auth import AuthConfigError, auth_headers
from drctl.providers.probe_http import Failed, call, completion, get, short
from drctl.providers.probe_http import metrics as read_metrics
from drctl.providers.probe_http import models as read_models
from drctl.providers.replicas import KubernetesReplicaSource, ReplicaEndpoint, ReplicaSource

GATEWAY = "gateway"  # the region gateway's target name in a RegionProbe


class ProbeTarget(Protocol):
    """Probes one target of a round, over the round's own client."""

    def __call__(
        self, name: str, url: str, completions: int, gateway: bool = False
    ) -> Awaitable[TargetProbe]: ...


def rotating_sample(names: list[str], fraction: float, round_no: int) -> set[str]:
    """The replicas sent a completion in round `round_no`: a window of ceil(fraction x n) names.

    The window moves by its own width each round over the sorted names, so every replica is in
    it at least once in any ceil(n / width) consecutive rounds, whatever order the source lists.
    """
    ordered = sorted(names)
    if not ordered:
        return set()
    width = min(len(ordered), max(1, math.ceil(fraction * len(ordered))))
    start = (round_no * width) % len(ordered)
    return {ordered[(start + i) % len(ordered)] for i in range(width)}


class InferenceProber:
    """Probes a region the way a user's request meets it: gateway and replicas, inference-aware.

    Args:
        cfg: the fleet config (health thresholds, model name, regions).
        replica_source: lists a region's replicas; default: the Kubernetes EndpointSlices of the
            track Services (the dev stack's emulated clusters publish them too).
        gateway_completions: completions sent through the gateway per probe. More than one, so a
            gateway that fails half its requests reads as DEGRADED rather than passing by luck.
        round_budget_s: how long a region's round may take (default 3 x probe_timeout_s).
    """

    # A gateway whose errors come from the few replicas failing their own checks is HEALTHY, not
    # DEGRADED (the old prober in bench/probe_baseline.py, from before this rule, turns it off).
    excuse_failing_replicas = True

    def __init__(
        self,
        cfg: FleetConfig,
        replica_source: ReplicaSource | None = None,
        gateway_completions: int = 3,
        round_budget_s: float | None = None,
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
        # No first token by the degraded threshold already makes a completion slow: the probe says
        # so then, instead of waiting out completion_timeout_s (seconds off a slow region's detection).
        self.slow_after_s = self.health.ttft_degraded_ms / 1000.0

        # One target's own work, counted from its first request: /health, then models, metrics and
        # completions in parallel. Time queued for a concurrency slot is not part of it.
        self.target_budget_s = self.timeout_s + self.completion_timeout_s
        # A region's round, listing included, ends by this: the workflows give the probe activity
        # 4 x probe_timeout_s + 5 s (or 10 s). Replicas still queued then are unprobed, not DOWN.
        self.round_budget_s = round_budget_s or 3 * self.timeout_s
        self._rounds: dict[str, int] = {}  # per region: drives the rotating completion sample

    async def probe_region(self, region: str) -> RegionProbe:
        return (await self.probe_regions([region]))[0]

    async def probe_regions(self, regions: list[str]) -> list[RegionProbe]:
        """Probe several regions at once, all sharing one bound on the targets probed at once."""
        try:
            headers = auth_headers(self.cfg)
        except AuthConfigError as exc:
            # An unreadable token is drctl's own config error: it says nothing about the regions.
            return [self._unprobed(self.cfg.region(r), str(exc)) for r in regions]
        return await self._round([self.cfg.region(r) for r in regions], headers)

    async def _round(self, regions: list[RegionConfig], headers: dict[str, str]) -> list[RegionProbe]:
        """One round over `regions`, in a session of its own."""
        sem = asyncio.Semaphore(self.health.probe_concurrency)
        # The semaphore bounds targets. The connector is sized for every request those targets can
        # have open at once (the gateway: models, metrics and its completions), so no request
        # ever waits inside the connector, where its deadline would already be running.
        per_target = 2 + self.gateway_completions
        source = self.health.probe_source_address
        connector = aiohttp.TCPConnector(
            limit=self.health.probe_concurrency * per_target,
            limit_per_host=0,
            local_addr=(str(source), 0) if source is not None else None,
        )
        async with aiohttp.ClientSession(
            connector=connector, headers=headers, timeout=aiohttp.ClientTimeout(total=None)
        ) as client:

            def probe(name: str, url: str, completions: int, gateway: bool = False) -> Awaitable[TargetProbe]:
                return self._bounded(name, url, client, sem, completions, gateway)

            return list(await asyncio.gather(*(self._region(probe, r) for r in regions)))

    @staticmethod
    def _unprobed(region: RegionConfig, why: str) -> RegionProbe:
        gateway = TargetProbe(
            target=GATEWAY, url=region.gateway_url, status=ProbeStatus.AUTH, error_class="auth", error=why
        )
        return RegionProbe(
            region=region.name,
            status=ProbeStatus.AUTH,
            reason=why,
            gateway=gateway,
            probed_at=datetime.now(UTC).isoformat(),
        )

    # --- one region ------------------------------------------------------------------------------

    async def _region(self, probe: ProbeTarget, region: RegionConfig) -> RegionProbe:
        started = time.monotonic()
        gw_task = asyncio.ensure_future(
            probe(GATEWAY, region.gateway_url, self.gateway_completions, gateway=True)
        )
        endpoints, source_error = await self._listed(region)
        # Not ready in its EndpointSlice: a pod still loading its model (vLLM keeps its port closed
        # for minutes meanwhile). Capacity coming, not a failing replica: reported apart, unprobed.
        loading = sorted(e.name for e in endpoints if not e.ready)
        ready = [e for e in endpoints if e.ready]
        replicas, unprobed = await self._replicas(probe, region, ready, started)
        if unprobed:
            source_error = f"{source_error}; {unprobed}" if source_error else unprobed
        return self._result(region, started, await gw_task, replicas, source_error, loading)

    async def _replicas(
        self, probe: ProbeTarget, region: RegionConfig, endpoints: list[ReplicaEndpoint], started: float
    ) -> tuple[list[TargetProbe], str | None]:
        """The replicas' probes of this round (a rotating sample gets a completion), and how many the
        round budget left unprobed, if any."""
        round_no = self._rounds.get(region.name, 0)
        self._rounds[region.name] = round_no + 1
        sampled = rotating_sample([e.name for e in endpoints], self.health.completion_sample, round_no)
        tasks = [
            asyncio.ensure_future(probe(e.name, e.url, 1 if e.name in sampled else 0)) for e in endpoints
        ]
        left = started + self.round_budget_s - time.monotonic()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=max(0.0, left))
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        replicas = [t.result() for t in tasks if not t.cancelled()]
        if len(replicas) < len(tasks):
            # Not reached within the round: unknown, which is neither healthy nor DOWN.
            return (
                replicas,
                f"{len(tasks) - len(replicas)} replicas not probed within {self.round_budget_s:g}s",
            )
        return replicas, None

    async def _listed(self, region: RegionConfig) -> tuple[list[ReplicaEndpoint], str | None]:
        """The region's replicas, or none and why the listing failed."""
        try:
            return await asyncio.wait_for(self.replica_source.replicas(region), self.timeout_s), None
        except Exception as exc:  # the listing is evidence, not a verdict: judge from the gateway
            return [], f"replica list unavailable: {short(exc)}"

    def _result(
        self,
        region: RegionConfig,
        started: float,
        gateway: TargetProbe,
        replicas: list[TargetProbe],
        source_error: str | None,
        loading: list[str] | None = None,
    ) -> RegionProbe:
        """The region's verdict from its ready replicas' probes and its gateway's; `loading` names the
        replicas not ready yet; `started` is the round's monotonic start."""
        loading = loading or []
        ttfts = [t.ttft_ms for t in [gateway, *replicas] if t.ttft_ms is not None]
        failing = [r for r in replicas if r.status != ProbeStatus.HEALTHY]
        fraction = len(failing) / len(replicas) if replicas else 0.0
        status, reason = self._judge(gateway, replicas, failing, fraction, source_error)
        if loading:
            reason = f"{reason}; {len(loading)} loading ({', '.join(loading[:5])}{', ...' if len(loading) > 5 else ''})"
        return RegionProbe(
            region=region.name,
            status=status,
            reason=reason,
            gateway=gateway,
            replicas=replicas,
            failing_fraction=round(fraction, 4),
            loading=loading,
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
        note = f" ({source_error})" if source_error else ""
        if gateway.status == ProbeStatus.DEGRADED:
            if (
                self.excuse_failing_replicas
                and gateway.error_class not in (None, "slow")
                and failing
                and fraction <= self.health.error_rate_degraded
            ):
                # The gateway's failed requests met the few replicas that fail their own checks: lost
                # capacity the gateway's own checks route around (one flapping replica of many), not
                # a region to move traffic from. Errors on replicas that pass /health stay DEGRADED.
                names = ", ".join(r.target for r in failing)
                return ProbeStatus.HEALTHY, (
                    f"gateway errors from {len(failing)}/{len(replicas)} failing "
                    f"replicas ({names}): {gateway.error}{note}"
                )
            return ProbeStatus.DEGRADED, f"gateway degraded: {gateway.error}{note}"
        if fraction > self.health.error_rate_degraded:
            names = ", ".join(f"{r.target} {r.error_class or r.status.value.lower()}" for r in failing)
            return ProbeStatus.DEGRADED, f"{len(failing)}/{len(replicas)} replicas failing: {names}"
        ttft = f"{gateway.ttft_ms:.0f}ms" if gateway.ttft_ms is not None else "n/a"
        healthy = len(replicas) - len(failing)
        return ProbeStatus.HEALTHY, f"gateway TTFT {ttft}; {healthy}/{len(replicas)} replicas healthy{note}"

    # --- one target ------------------------------------------------------------------------------

    async def _bounded(
        self,
        name: str,
        url: str,
        client: aiohttp.ClientSession,
        sem: asyncio.Semaphore,
        completions: int,
        gateway: bool,
    ) -> TargetProbe:
        base = url.rstrip("/")
        try:
            # The bound is per target, held across its few requests, so its /health connection is
            # reused at once instead of idling while other targets queue. No deadline runs while
            # it waits for the slot; each request in _call has its own, started once it holds it.
            async with sem:
                return await self._target(name, base, client, completions, gateway)
        except Exception as exc:  # noqa: BLE001 - a probe reports, it never raises (e.g. a malformed URL)
            return TargetProbe(
                target=name, url=base, status=ProbeStatus.DOWN, error_class="probe_error", error=short(exc)
            )

    async def _target(
        self, name: str, base: str, client: aiohttp.ClientSession, completions: int, gateway: bool
    ) -> TargetProbe:
        probe = TargetProbe(target=name, url=base, status=ProbeStatus.HEALTHY)
        health: Failed | None = None
        try:
            _, latency_ms = await call(self.timeout_s, lambda: get(client, f"{base}/health", keep=True))
            probe.latency_ms = round(latency_ms, 2)
        except Failed as f:
            if not (gateway and completions and f.cls == "http_5xx"):
                # Dead or refusing: nothing further would answer, and waiting on it would only
                # stretch the probe of a dead region past its bound.
                status = ProbeStatus.AUTH if f.cls == "auth" else ProbeStatus.DOWN
                return probe.model_copy(update={"status": status, "error_class": f.cls, "error": str(f)})
            # A gateway that answers 5xx on /health passed the request to one replica, which
            # failed it: one flapping replica of many does so until the gateway's checks drop it
            # (CI saw two such 503s fail a region over). Its completions say whether the region
            # serves; when none does, it is DOWN all the same.
            health = f
        if completions == 0:
            # Not in this round's completion sample: /metrics is the whole check.
            self._read_metrics(probe, await read_metrics(client, base, self.timeout_s))
            return probe
        models, metrics, ttfts = await asyncio.gather(
            read_models(client, base, self.timeout_s, self.model),
            read_metrics(client, base, self.timeout_s),
            asyncio.gather(
                *(
                    completion(client, base, self.completion_timeout_s, self.model, self.slow_after_s)
                    for _ in range(completions)
                )
            ),
        )
        self._read_metrics(probe, metrics)
        return self._classify(probe, models, ttfts, health)

    def _classify(
        self,
        probe: TargetProbe,
        models: Failed | None,
        ttfts: list[float | Failed],
        health: Failed | None = None,
    ) -> TargetProbe:
        """Judge a target that answered /health (a gateway: perhaps with a 5xx, `health`) from its
        model list and its completions."""
        probe.models_ok = models is None
        slow = [r for r in ttfts if isinstance(r, Failed) and r.cls == "slow"]
        failures = [r for r in [health, models, *ttfts] if isinstance(r, Failed) and r.cls != "slow"]
        good = [t for t in ttfts if isinstance(t, float)]
        if good:
            probe.ttft_ms = round(statistics.median(good), 2)
        refused = next((f for f in failures if f.cls == "auth"), None)
        if refused is not None:
            # vLLM keeps /health open under --api-key: a 401 on /v1 is our token, not the server.
            probe.status, probe.error_class, probe.error = ProbeStatus.AUTH, refused.cls, str(refused)
        elif isinstance(models, Failed) and models.cls == "model_missing":
            # Checked first: completions then fail too (404), and "model missing" is the cause.
            probe.status, probe.error_class, probe.error = ProbeStatus.DOWN, models.cls, str(models)
        elif not good and not slow:
            first = next(t for t in ttfts if isinstance(t, Failed))
            probe.status, probe.error_class = ProbeStatus.DOWN, first.cls
            probe.error = f"completion failed ({len(ttfts)}/{len(ttfts)}): {first}"
        elif failures:
            probe.status, probe.error_class = ProbeStatus.DEGRADED, failures[0].cls
            asked = len(ttfts) + 1 + (health is not None)
            probe.error = f"{len(failures)}/{asked} inference requests failed: {failures[0]}"
        elif slow and statistics.median([*good, *(math.inf for _ in slow)]) > self.health.ttft_degraded_ms:
            # The median completion had no first token by the threshold: slow, known without waiting.
            probe.status, probe.error_class = ProbeStatus.DEGRADED, "slow"
            probe.error = (
                f"slow TTFT: {len(slow)}/{len(ttfts)} completions had no first token within "
                f"{self.health.ttft_degraded_ms:g}ms"
            )
        elif probe.ttft_ms is not None and probe.ttft_ms > self.health.ttft_degraded_ms:
            probe.status = ProbeStatus.DEGRADED
            probe.error = f"slow TTFT {probe.ttft_ms:.0f}ms > {self.health.ttft_degraded_ms:g}ms"
        return probe

    @staticmethod
    def _read_metrics(probe: TargetProbe, metrics: dict[str, float] | None) -> None:
        if metrics:
            probe.queue_depth = metrics.get(prom.VLLM_WAITING)
            probe.running = metrics.get(prom.VLLM_RUNNING)
            probe.kv_cache_usage = metrics.get(prom.VLLM_KV_CACHE)
            probe.finished = metrics.get(prom.VLLM_SUCCESS)
