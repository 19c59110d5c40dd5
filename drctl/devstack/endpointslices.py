"""The emulated clusters' EndpointSlice controller: a Service's pods, published as discovery.k8s.io/v1.

As the real controller (kube-controller-manager's endpointslice-controller) does:
- every Service with a selector gets slices labelled `kubernetes.io/service-name` and
  `endpointslice.kubernetes.io/managed-by`, owned by the Service and carrying its labels;
- each pod that matches the selector is an endpoint, with `conditions.ready` (ready and not
  terminating), `serving` (ready) and `terminating`, and a `targetRef` to the pod;
- endpoints are grouped by their resolved ports, one slice per distinct port set. Every emulated
  pod shares 127.0.0.1 and listens on a port of its own, so the Service's targetPort resolves to
  that port per pod, as a named targetPort resolves to each pod's own containerPort;
- a Service that selects no pod keeps one empty slice, so "no endpoints" is visible;
- slices managed by anything else are left alone.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Protocol

SLICES, SERVICES = "discovery.k8s.io/v1/endpointslices", "v1/services"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL, MANAGED_BY = "endpointslice.kubernetes.io/managed-by", "endpointslice-controller.k8s.io"
POD_ADDRESS = "127.0.0.1"


@dataclass
class PodEndpoint:
    """What the controller needs to know of one pod."""

    name: str
    namespace: str
    port: int
    ready: bool
    labels: dict[str, str] = field(default_factory=dict)
    uid: str = ""
    terminating: bool = False


class SliceStore(Protocol):
    """The part of RegionCluster the controller writes through."""

    def list_objects(
        self, key: str, ns: str | None = None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]: ...
    async def create_object(
        self, key: str, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]: ...
    async def replace_object(
        self, key: str, ns: str | None, name: str, body: dict[str, Any], subresource: str | None = None
    ) -> dict[str, Any]: ...
    async def delete_object(self, key: str, ns: str | None, name: str) -> dict[str, Any]: ...


def desired_slices(
    services: list[dict[str, Any]], pods: list[PodEndpoint]
) -> dict[tuple[str, str], dict[str, Any]]:
    """Every managed slice that should exist, by (namespace, name)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for svc in services:
        meta, spec = svc["metadata"], svc.get("spec") or {}
        selector = spec.get("selector") or {}
        if not selector:
            continue  # a selector-less Service's endpoints are managed by hand, not by the controller
        ns = meta.get("namespace", "")
        members = [
            p for p in pods if p.namespace == ns and all(p.labels.get(k) == v for k, v in selector.items())
        ]
        by_port: dict[int | None, list[PodEndpoint]] = defaultdict(list)
        for p in sorted(members, key=lambda p: (p.name, p.port)):
            by_port[p.port].append(p)
        if not by_port:
            by_port[None] = []
        for port, eps in by_port.items():
            body = _slice(svc, port, eps)
            out[(ns, body["metadata"]["name"])] = body
    return out


def _slice(svc: dict[str, Any], port: int | None, pods: list[PodEndpoint]) -> dict[str, Any]:
    meta = svc["metadata"]
    name, ns, uid = meta["name"], meta.get("namespace", ""), meta.get("uid", "")
    # Real slices are named `<service>-<random>`; a hash of the Service's uid and the port keeps the
    # name stable across reconciles and fresh for a re-created Service.
    suffix = hashlib.sha1(f"{uid}/{port}".encode()).hexdigest()[:5]
    ports = (
        [
            {"name": p.get("name", ""), "port": port, "protocol": p.get("protocol", "TCP")}
            for p in (svc.get("spec") or {}).get("ports") or []
        ]
        if port is not None
        else None
    )
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
        "metadata": {
            "name": f"{name}-{suffix}", "namespace": ns,
            "labels": {**(meta.get("labels") or {}), SERVICE_NAME_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": name, "uid": uid,
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "endpoints": [{
            "addresses": [POD_ADDRESS],
            "conditions": {"ready": p.ready and not p.terminating, "serving": p.ready, "terminating": p.terminating},
            "targetRef": {"kind": "Pod", "namespace": p.namespace, "name": p.name, "uid": p.uid},
        } for p in pods] or None,
        "ports": ports,
    }  # fmt: skip


def _content(obj: dict[str, Any]) -> tuple[Any, ...]:
    meta = obj.get("metadata") or {}
    return (
        meta.get("labels"),
        meta.get("ownerReferences"),
        obj.get("addressType"),
        obj.get("endpoints"),
        obj.get("ports"),
    )


async def publish(store: SliceStore, services: list[dict[str, Any]], pods: list[PodEndpoint]) -> int:
    """Bring the managed slices to what the Services select; returns the number of writes."""
    want = desired_slices(services, pods)
    have = {
        (o["metadata"]["namespace"], o["metadata"]["name"]): o
        for o in store.list_objects(SLICES, label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}")
    }
    writes = 0
    for (ns, name), body in want.items():
        current = have.get((ns, name))
        if current is None:
            await store.create_object(SLICES, body, namespace=ns)
        elif _content(current) != _content(body):
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await store.replace_object(SLICES, ns, name, body)
        else:
            continue
        writes += 1
    for ns, name in have.keys() - want.keys():
        await store.delete_object(SLICES, ns, name)
        writes += 1
    return writes
