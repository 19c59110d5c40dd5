"""One region's capacity signals, read where its replicas are: the ready endpoints, their /metrics,
and the replicas its serving Deployments ask for.

- Ready replicas are the ready endpoints of the track Services' EndpointSlices (the replicas the
  Service routes to), found as the prober finds them (drctl/providers/replicas.py).
- Each ready replica's /metrics is read once, concurrently, every read bounded by
  health.probe_timeout_s; what fails is named in `problems` and left out of the sums, never read as 0.
- Desired replicas: spec.replicas of the Deployments of the tracks that have endpoints.

The arithmetic over two readings is pure (drctl/models/capacity_sample.py).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from drctl.config.schema import FleetConfig
from drctl.models.capacity_sample import CapacityReadResult, CapacitySample, ReplicaGauges, region_signals
from drctl.models.passive import SignalSnapshot
from drctl.providers.kube_client import api_client_for
from drctl.providers.prom import parse_series
from drctl.providers.replicas import ReplicaEndpoint, ReplicaSource
from drctl.providers.vllm_metrics import (
    ReplicaTarget,
    counts_http,
    pooled_client,
    read_each,
    read_page,
    replica_gauges,
    series_snapshot,
)

REQUEST_TIMEOUT = (5.0, 10.0)  # (connect, read) of a Deployment read: a hung API server must not stall a tick


class CapacitySignalReader:
    """Reads a region's capacity signals; one per worker, its HTTP client pooled across calls."""

    def __init__(
        self,
        cfg: FleetConfig,
        replicas: ReplicaSource,
        *,
        http: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cfg = cfg
        self._replicas = replicas
        self._http = http or pooled_client()
        self._clock = clock
        self._kube: dict[str, client.ApiClient] = {}
        self._lock = threading.Lock()  # Deployment reads run on threads, one per concurrent call

    async def aclose(self) -> None:
        await self._http.aclose()
        for api in self._kube.values():
            api.close()

    async def read(
        self, region: str, previous: CapacitySample | None, max_window_s: float
    ) -> CapacityReadResult:
        problems: list[str] = []
        try:
            endpoints = await self._replicas.replicas(self.cfg.region(region))
        except Exception as exc:  # noqa: BLE001 - any listing failure is reported; no replica is counted
            problems.append(f"listing replicas failed: {type(exc).__name__}: {exc}")
            endpoints = []
        ready = [e for e in endpoints if e.ready]
        asked, reads = await asyncio.gather(
            self._desired(region, ready, problems), self._read_all(region, ready, problems)
        )
        now = self._clock()
        return region_signals(
            region,
            reads,
            previous,
            ready=len(ready),
            # Unread, the replicas asked for are taken as the ready ones: never fewer, which would
            # make every target look as if it needed pre-scaling.
            desired=len(ready) if asked is None else asked,
            taken_at=now,
            measured_at=datetime.fromtimestamp(now, UTC),
            max_window_s=max_window_s,
            problems=problems,
        )

    async def _read_all(
        self, region: str, ready: list[ReplicaEndpoint], problems: list[str]
    ) -> list[tuple[SignalSnapshot, ReplicaGauges]]:
        timeout_s = self.cfg.health.probe_timeout_s

        async def one(t: ReplicaTarget) -> tuple[SignalSnapshot, ReplicaGauges]:
            text = await read_page(self._http, t, timeout_s=timeout_s)
            series = parse_series(text)
            running, waiting, seqs = replica_gauges(series)
            snap = series_snapshot(
                series, region=region, source=t.name, taken_at=self._clock(), http=counts_http(text)
            )
            return snap, ReplicaGauges(name=t.name, running=running, waiting=waiting, max_num_seqs=seqs)

        targets = [ReplicaTarget(region, e.name, e.url) for e in ready]
        reads, errors = await read_each(
            targets, one, timeout_s=timeout_s, concurrency=self.cfg.health.probe_concurrency
        )
        by_name = {t.name: t.url for t in targets}
        problems += [f"replica {name} ({by_name[name]}) {why}" for name, why in sorted(errors.items())]
        return sorted(reads, key=lambda r: r[0].source)

    async def _desired(self, region: str, ready: list[ReplicaEndpoint], problems: list[str]) -> int | None:
        """spec.replicas summed over the Deployments of the serving tracks (stable when none serves)."""
        tracks = sorted({e.track or "stable" for e in ready} or {"stable"})
        names = [self.cfg.workload.deployment_name(t) for t in tracks]
        return await asyncio.to_thread(self._read_desired, region, names, problems)

    def _read_desired(self, region: str, names: list[str], problems: list[str]) -> int | None:
        cfg = self.cfg.region(region)
        with self._lock:
            if region not in self._kube:
                self._kube[region] = api_client_for(cfg.kube)
            apps = client.AppsV1Api(self._kube[region])
        total, unread = 0, False
        for name in names:
            try:
                dep = apps.read_namespaced_deployment(
                    name, cfg.kube.namespace, _request_timeout=REQUEST_TIMEOUT
                )
            except ApiException as exc:
                if exc.status != 404:  # a track without a Deployment asks for nothing
                    problems.append(f"deployment {cfg.kube.namespace}/{name}: {exc.status} {exc.reason}")
                    unread = True
                continue
            except Exception as exc:  # noqa: BLE001 - urllib3 errors and timeouts: reported, counted as unknown
                problems.append(f"deployment {cfg.kube.namespace}/{name}: {type(exc).__name__}: {exc}")
                unread = True
                continue
            total += dep.spec.replicas if dep.spec and dep.spec.replicas is not None else 1
        return None if unread else total
