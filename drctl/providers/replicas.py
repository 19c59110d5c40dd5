"""Where the prober finds a region's replicas: the platform owns them, so it is asked each time.

The EndpointSlices (discovery.k8s.io/v1) of the track Services `<app>-<track>`: the addresses the
Service routes to, as the cluster's EndpointSlice controller publishes them. The dev stack's
emulated clusters publish them the same way (drctl/devstack/endpointslices.py), so this one path
is what runs everywhere. The legacy Endpoints API is not read: it is deprecated since Kubernetes
1.33, and every supported release serves EndpointSlices.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Protocol

from kubernetes import client
from pydantic import BaseModel, Field

from drctl.config.schema import TRACKS, FleetConfig, RegionConfig
from drctl.providers.kube_client import api_client_for

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
PAGE_SIZE = 200  # slices per list call: a big fleet pages instead of one huge answer
MAX_PAGES = 50  # a continue token that never ends must not keep the probe listing forever
REQUEST_TIMEOUT = (5.0, 10.0)


class ReplicaEndpoint(BaseModel):
    name: str
    url: str
    track: str | None = None
    ready: bool = Field(
        True, description="EndpointSlice conditions.ready (unset reads as ready, as the API says)."
    )


class ReplicaSource(Protocol):
    async def replicas(self, region: RegionConfig) -> list[ReplicaEndpoint]:
        """The replicas that should be serving in this region (dead ones included)."""
        ...


class KubernetesReplicaSource:
    """EndpointSlices of the track Services, read with the region's own API client.

    The prober must run where pod IPs are routable (a worker inside the cluster or its VPC).
    Not-ready endpoints are included with ready=False: mostly a pod still loading its model (vLLM
    keeps its port closed for minutes meanwhile), capacity coming that the prober reports apart.
    Terminating ones are not: a pod being scaled down or replaced is meant to stop serving.
    """

    def __init__(self, cfg: FleetConfig, tracks: tuple[str, ...] = TRACKS) -> None:
        self.cfg = cfg
        self.services = {cfg.workload.deployment_name(t): t for t in tracks}
        self.port = cfg.workload.container_port
        # Label selection happens in the API server: other Services' slices never cross the wire.
        self.selector = f"{SERVICE_NAME_LABEL} in ({','.join(sorted(self.services))})"
        # Clients are built on first use: a worker must start while a kubeconfig or cluster is unusable.
        self._clients: dict[str, client.ApiClient] = {}
        self._lock = threading.Lock()

    def _client(self, region: RegionConfig) -> client.ApiClient:
        with self._lock:
            if region.name not in self._clients:
                self._clients[region.name] = api_client_for(region.kube)
            return self._clients[region.name]

    async def replicas(self, region: RegionConfig) -> list[ReplicaEndpoint]:
        return await asyncio.to_thread(self._list, region)

    def _list(self, region: RegionConfig) -> list[ReplicaEndpoint]:
        out: dict[tuple[str, str], ReplicaEndpoint] = {}
        for s in self._slices(region):
            svc = ((s.metadata.labels if s.metadata else None) or {}).get(SERVICE_NAME_LABEL)
            if svc not in self.services or (s.address_type or "IPv4") not in ("IPv4", "IPv6"):
                continue  # an FQDN slice names no pod the prober could reach
            port = self._serving_port(s.ports or [])
            for ep in s.endpoints or []:
                if ep.conditions is not None and ep.conditions.terminating:
                    continue
                name = ep.target_ref.name if ep.target_ref else None
                for addr in ep.addresses or []:
                    url = _url(addr, port)
                    # During a controller resync one endpoint may sit in two slices for a moment.
                    out.setdefault(
                        (name or addr, url),
                        ReplicaEndpoint(
                            name=name or addr,
                            url=url,
                            track=self.services[svc],
                            ready=ep.conditions is None or ep.conditions.ready is not False,
                        ),
                    )
        return list(out.values())

    def _slices(self, region: RegionConfig) -> list[Any]:
        api = client.DiscoveryV1Api(self._client(region))
        items: list[Any] = []
        token: str | None = None
        for _ in range(MAX_PAGES):
            page = api.list_namespaced_endpoint_slice(
                region.kube.namespace,
                label_selector=self.selector,
                limit=PAGE_SIZE,
                _continue=token,
                _request_timeout=REQUEST_TIMEOUT,
            )
            items += page.items
            token = page.metadata.var_continue if page.metadata else None
            if not token:
                return items
        raise RuntimeError(
            f"EndpointSlices in {region.name}/{region.kube.namespace}: still paging after {MAX_PAGES} pages"
        )

    def _serving_port(self, ports: list[Any]) -> int:
        """The slice's port for the Service's serving port: the only one, or the container port."""
        numbers = [p.port for p in ports if p.port]
        if len(numbers) == 1 or (numbers and self.port not in numbers):
            return int(numbers[0])
        return self.port


def _url(addr: str, port: int) -> str:
    return f"http://[{addr}]:{port}" if ":" in addr else f"http://{addr}:{port}"
