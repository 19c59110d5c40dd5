"""One fleet's passive signals, read in one call: what a watcher runs every `health.passive.interval_s`.

`direct` reads each region's gateway `show stat` over its runtime socket (regional tier haproxy)
and every replica's /metrics; `prometheus` asks Prometheus instead. Either way each call returns
a verdict per region from the recent window (drctl.models.passive). Why a read failed is kept in
`read_errors`; the failure itself shows as a missing source once its last good read is too old.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx

from drctl.config.schema import FleetConfig, HAProxyRegional, RegionConfig
from drctl.models.passive import PassiveThresholds, PassiveVerdict
from drctl.models.passive_window import SignalWindow
from drctl.providers.gateway_stats import gateway_snapshots
from drctl.providers.haproxy_runtime import HAProxyError, HAProxyRuntime
from drctl.providers.prom_query import PrometheusQueryError, PrometheusSignals
from drctl.providers.replicas import ReplicaEndpoint, ReplicaSource
from drctl.providers.vllm_metrics import ReplicaTarget, pooled_client, read_replicas


class PassiveReader:
    """Reads and judges every region's passive signals; keeps the window between calls."""

    def __init__(
        self,
        cfg: FleetConfig,
        replicas: ReplicaSource,
        *,
        client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
        replicas_refresh_s: float = 10.0,
    ) -> None:
        self.cfg = cfg
        self.passive = cfg.health.passive
        self.th = PassiveThresholds.from_config(self.passive)
        self.window = SignalWindow(self.th)
        self.read_errors: dict[str, str] = {}
        self._replica_source = replicas
        self._client = client or pooled_client()
        self._clock = clock
        self._refresh_s = replicas_refresh_s
        self._listed: dict[str, tuple[float, list[ReplicaEndpoint]]] = {}
        prom = self.passive.prometheus
        self._prom = (
            PrometheusSignals(
                prom.url, region_label=prom.region_label, selector=prom.selector, timeout_s=prom.timeout_s
            )
            if self.passive.source == "prometheus" and prom
            else None
        )
        tier = cfg.traffic.regional_tier
        default = [tier.backend] if isinstance(tier, HAProxyRegional) else []
        self._backends = self.passive.backends if self.passive.backends is not None else default

    async def aclose(self) -> None:
        await self._client.aclose()
        if self._prom:
            self._prom.close()

    async def read(self) -> list[PassiveVerdict]:
        """Read every region once and return a verdict per region, in config order."""
        regions = self.cfg.region_names
        if self._prom is not None:
            try:
                return await asyncio.to_thread(self._prom.verdicts, regions, self.th)
            except PrometheusQueryError as exc:
                self.read_errors["prometheus"] = str(exc)
                return [self.window.verdict(r, self._clock()) for r in regions]  # nothing fresh: MISSING
        await asyncio.gather(*(self._read_region(r) for r in self.cfg.regions))
        now = self._clock()
        return [self.window.verdict(r, now) for r in regions]

    async def _read_region(self, region: RegionConfig) -> None:
        await asyncio.gather(self._read_gateway(region), self._read_replicas(region))

    async def _read_gateway(self, region: RegionConfig) -> None:
        if not (region.gateway_runtime_socket and self._backends):
            return
        runtime = HAProxyRuntime(region.gateway_runtime_socket, timeout_s=self.cfg.health.probe_timeout_s)
        key = f"{region.name}/gateway"
        try:
            snaps = await asyncio.to_thread(
                gateway_snapshots, runtime, region.name, self._backends, self._clock
            )
        except HAProxyError as exc:
            self.read_errors[key] = str(exc)
            return
        self.read_errors.pop(key, None)
        for s in snaps:
            self.window.add(s)

    async def _replicas(self, region: RegionConfig) -> list[ReplicaEndpoint]:
        """The region's replicas, listed again every replicas_refresh_s (the platform owns them)."""
        listed_at, endpoints = self._listed.get(region.name, (float("-inf"), []))
        if self._clock() - listed_at < self._refresh_s:
            return endpoints
        key = f"{region.name}/replicas"
        try:
            fresh = await self._replica_source.replicas(region)
        except Exception as exc:  # noqa: BLE001 - any listing failure keeps the last list; it is reported
            self.read_errors[key] = f"listing replicas failed: {type(exc).__name__}: {exc}"
            return endpoints
        self.read_errors.pop(key, None)
        for gone in {e.name for e in endpoints} - {e.name for e in fresh}:
            self.window.forget(region.name, gone)
            self.read_errors.pop(f"{region.name}/{gone}", None)
        self._listed[region.name] = (self._clock(), fresh)
        return fresh

    async def _read_replicas(self, region: RegionConfig) -> None:
        # A replica not ready yet is loading its model with its port closed: nothing to read, no error.
        ready = [e for e in await self._replicas(region) if e.ready]
        targets = [ReplicaTarget(region.name, e.name, e.url) for e in ready]
        snaps, errors = await read_replicas(
            self._client,
            targets,
            timeout_s=self.cfg.health.probe_timeout_s,
            concurrency=self.cfg.health.probe_concurrency,
            clock=self._clock,
        )
        for t in targets:
            key = f"{region.name}/{t.name}"
            if t.name in errors:
                self.read_errors[key] = errors[t.name]
            else:
                self.read_errors.pop(key, None)
        for s in snaps:
            self.window.add(s)
