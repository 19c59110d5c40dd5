"""Where the prober finds a region's replicas: the platform owns them, so it is asked each time.

Production: the EndpointSlices (else Endpoints) of the track Services `<app>-<track>`, the
addresses the Service routes to. Dev stack: the region admin API `GET /replicas`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import httpx
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel

from drctl.config import TRACKS, FleetConfig, RegionConfig
from drctl.providers.kubernetes import api_client_for


class ReplicaEndpoint(BaseModel):
    name: str
    url: str
    track: str | None = None


class ReplicaSource(Protocol):
    async def replicas(self, region: RegionConfig) -> list[ReplicaEndpoint]:
        """The replicas that should be serving in this region (dead ones included)."""
        ...


class DevstackReplicaSource:
    """The dev stack's node agent, asked over its admin API (docs/devstack.md)."""

    def __init__(self, timeout_s: float = 2.0, tracks: set[str] | None = None) -> None:
        self.timeout_s = timeout_s
        self.tracks = tracks

    async def replicas(self, region: RegionConfig) -> list[ReplicaEndpoint]:
        if not region.devstack_admin_url:
            raise ValueError(f"region {region.name} has no devstack_admin_url")
        async with httpx.AsyncClient(timeout=self.timeout_s) as http:
            resp = await http.get(f"{region.devstack_admin_url.rstrip('/')}/replicas")
            resp.raise_for_status()
            rows: list[dict[str, Any]] = resp.json()
        # Killed and frozen replicas stay in the list: the node agent still means them to serve,
        # so they count against the region instead of silently shrinking it.
        return [
            ReplicaEndpoint(name=r["pod"], url=f"http://127.0.0.1:{r['port']}", track=r.get("track"))
            for r in rows
            if self.tracks is None or r.get("track") in self.tracks
        ]


class KubernetesReplicaSource:
    """EndpointSlices of the track Services, read with the region's own API client.

    The prober must run where pod IPs are routable (a worker inside the cluster or its VPC).
    Not-ready endpoints are included: a pod the Service dropped is a replica that is failing.
    """

    def __init__(self, cfg: FleetConfig, tracks: tuple[str, ...] = TRACKS) -> None:
        self.services = {cfg.workload.deployment_name(t): t for t in tracks}
        self.port = cfg.workload.container_port
        self._clients = {r.name: api_client_for(r.kube) for r in cfg.regions}

    async def replicas(self, region: RegionConfig) -> list[ReplicaEndpoint]:
        return await asyncio.to_thread(self._list, region)

    def _list(self, region: RegionConfig) -> list[ReplicaEndpoint]:
        api = self._clients[region.name]
        ns = region.kube.namespace
        try:
            slices = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
                ns, _request_timeout=(5.0, 10.0)
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            return self._from_endpoints(api, ns)
        out: list[ReplicaEndpoint] = []
        for s in slices.items:
            svc = ((s.metadata.labels if s.metadata else None) or {}).get("kubernetes.io/service-name")
            if svc not in self.services:
                continue
            port = next((p.port for p in s.ports or [] if p.port), self.port)
            for ep in s.endpoints or []:
                name = ep.target_ref.name if ep.target_ref else None
                for addr in ep.addresses or []:
                    out.append(
                        ReplicaEndpoint(name=name or addr, url=_url(addr, port), track=self.services[svc])
                    )
        return out

    def _from_endpoints(self, api: client.ApiClient, ns: str) -> list[ReplicaEndpoint]:
        out: list[ReplicaEndpoint] = []
        core = client.CoreV1Api(api)
        for svc, track in self.services.items():
            try:
                ep = core.read_namespaced_endpoints(svc, ns, _request_timeout=(5.0, 10.0))
            except ApiException as exc:
                if exc.status == 404:  # that track is not deployed
                    continue
                raise
            for subset in ep.subsets or []:
                port = next((p.port for p in subset.ports or [] if p.port), self.port)
                for a in [*(subset.addresses or []), *(subset.not_ready_addresses or [])]:
                    name = a.target_ref.name if a.target_ref else a.ip
                    out.append(ReplicaEndpoint(name=name, url=_url(a.ip, port), track=track))
        return out


def _url(addr: str, port: int) -> str:
    return f"http://[{addr}]:{port}" if ":" in addr else f"http://{addr}:{port}"


class AutoReplicaSource:
    """Per region: the dev stack admin API where configured, else the Kubernetes API."""

    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self.devstack = DevstackReplicaSource(timeout_s=cfg.health.probe_timeout_s)
        self._kube: KubernetesReplicaSource | None = None

    async def replicas(self, region: RegionConfig) -> list[ReplicaEndpoint]:
        if region.devstack_admin_url:
            return await self.devstack.replicas(region)
        if self._kube is None:  # built lazily: a dev-stack-only fleet never needs a kubeconfig
            self._kube = KubernetesReplicaSource(self.cfg)
        return await self._kube.replicas(region)
