"""A stand-in Gateway API controller for the emulated API: HTTPRoutes are programmed late, with status.

A real implementation (Envoy Gateway, Istio, a cloud load balancer) watches HTTPRoutes and
programs its data plane asynchronously, then reports per parent Gateway in
`status.parents[].conditions` (gateway-api apis/v1/httproute_types.go RouteStatus, shared_types.go
RouteParentStatus): `Accepted` and `ResolvedRefs`, each with the `observedGeneration` of the spec
it judged. A backendRef to a Service that does not exist gets ResolvedRefs False with reason
`BackendNotFound`, and its share of requests gets 5xx (the HTTPBackendRef docs: "500 status codes
MUST be returned for requests that would have otherwise been routed to an invalid backend").

This one implements the region's Gateway `<region>-gateway`: only routes whose parentRefs name it
are its own (a detached route gets no status, as with a real controller). A route's new spec, or
a Service appearing or going, is acted on `program_delay_s` after it was first seen; the route
that drives the region's data plane has its track weights set on the region gateway HAProxy
(`program`) before its status says Accepted, so a client that waits for Accepted at its
generation knows the weights are in effect.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from drctl.devstack.kube import RegionCluster
from drctl.devstack.kube_resources import now
from drctl.devstack.label_selector import ApiError
from drctl.devstack.nodeagent import GatewayHandle
from drctl.providers.haproxy_runtime import HAProxyError

ROUTES, SERVICES = "gateway.networking.k8s.io/v1/httproutes", "v1/services"
GROUP = "gateway.networking.k8s.io"
CONTROLLER_NAME = "drctl.io/devstack-gateway-controller"
HAPROXY_MAX_WEIGHT = 256

# Sets the data plane's track weights; False when the data plane cannot take them now (retried).
Program = Callable[[dict[str, int]], Awaitable[bool]]


def gateway_name(region: str) -> str:
    """The Gateway a region's routes attach to (the region gateway HAProxy plays it)."""
    return f"{region}-gateway"


def _condition(ctype: str, ok: bool, reason: str, message: str, generation: int) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": now(),
    }


def resolved_refs(route: dict[str, Any], services: set[tuple[str, str]]) -> tuple[bool, str, str]:
    """ResolvedRefs for a route: (ok, reason, message), as shared_types.go names the reasons."""
    ns = route["metadata"].get("namespace", "")
    missing, invalid = [], []
    for rule in (route.get("spec") or {}).get("rules") or []:
        for ref in rule.get("backendRefs") or []:
            if ref.get("group", "") != "" or ref.get("kind", "Service") != "Service":
                invalid.append(f"{ref.get('group', '')}/{ref.get('kind')} {ref.get('name')}")
            elif (ref.get("namespace", ns), ref.get("name")) not in services:
                missing.append(f"{ref.get('namespace', ns)}/{ref.get('name')}")
    if invalid:
        return False, "InvalidKind", f"unsupported backendRef kinds: {', '.join(invalid)}"
    if missing:
        return False, "BackendNotFound", f"Service(s) not found: {', '.join(missing)}"
    return True, "ResolvedRefs", "All references resolved"


def haproxy_weights(route: dict[str, Any], track_of: dict[str, str]) -> dict[str, int]:
    """Track server weights from the first rule that routes to track Services; others get 0.

    Gateway API weights run to 1,000,000 and HAProxy's to 256: scaled down, proportions kept, and
    a weight above 0 never rounds to 0.
    """
    weights = dict.fromkeys(track_of.values(), 0)
    for rule in (route.get("spec") or {}).get("rules") or []:
        refs = [r for r in rule.get("backendRefs") or [] if r.get("name") in track_of]
        if refs:
            for ref in refs:
                weights[track_of[ref["name"]]] = int(ref.get("weight", 1))
            break
    top = max(weights.values(), default=0)
    if top > HAPROXY_MAX_WEIGHT:
        weights = {t: max(1, w * HAPROXY_MAX_WEIGHT // top) if w else 0 for t, w in weights.items()}
    return weights


def haproxy_program(gateway: GatewayHandle, backend: str) -> Program:
    """Set track weights on the region gateway HAProxy's `backend`; False while it is down or faulted."""

    async def program(weights: dict[str, int]) -> bool:
        if not gateway.usable:
            return False
        try:
            await asyncio.to_thread(gateway.runtime.set_weights, backend, weights)
        except HAProxyError:
            return False
        return True

    return program


@dataclass
class GatewayController:
    """Programs the HTTPRoutes attached to Gateway `gateway`, `program_delay_s` after they change."""

    cluster: RegionCluster
    gateway: str
    program_delay_s: float
    # The route whose weights drive the region gateway, (namespace, name), and how to set them.
    data_plane: tuple[str, str] | None = None
    program: Program | None = None
    track_of: dict[str, str] = field(default_factory=dict)  # Service name -> track
    _pending: dict[tuple[str, str], tuple[Any, float]] = field(default_factory=dict)

    async def run(self) -> None:
        while True:
            try:
                await self.reconcile()
            except Exception as exc:  # one bad route must not stop the controller
                print(f"gateway controller: reconcile failed: {exc!r}", file=sys.stderr, flush=True)
            # The node agent clears `changed`; a short period bounds how late a change is seen.
            await asyncio.sleep(min(0.1, self.program_delay_s or 0.1))

    def _ours(self, ref: dict[str, Any]) -> bool:
        return (
            ref.get("name") == self.gateway
            and ref.get("kind", "Gateway") == "Gateway"
            and ref.get("group", GROUP) == GROUP
        )

    async def reconcile(self) -> None:
        services = {
            (s["metadata"].get("namespace", ""), s["metadata"]["name"])
            for s in self.cluster.list_objects(SERVICES)
        }
        for route in self.cluster.list_objects(ROUTES):
            await self._sync(route, services)

    async def _sync(self, route: dict[str, Any], services: set[tuple[str, str]]) -> None:
        meta = route["metadata"]
        key, generation = (meta.get("namespace", ""), meta["name"]), int(meta.get("generation", 1))
        parents = [p for p in (route.get("spec") or {}).get("parentRefs") or [] if self._ours(p)]
        ok, reason, message = resolved_refs(route, services)
        verdict = (generation, ok, reason, message, [sorted(p.items()) for p in parents])
        reported = self._reported(route)
        if reported == verdict or (not parents and reported is None):  # up to date, or never ours
            self._pending.pop(key, None)
            return
        seen = self._pending.get(key)
        if seen is None or seen[0] != verdict:
            seen = self._pending[key] = (verdict, time.monotonic())
        if time.monotonic() - seen[1] < self.program_delay_s:
            return
        if parents and key == self.data_plane and self.program is not None:
            if not await self.program(haproxy_weights(route, self.track_of)):
                return  # the data plane is down: Accepted waits until it took the weights
        conditions = [
            _condition("Accepted", True, "Accepted", "Route is accepted", generation),
            _condition("ResolvedRefs", ok, reason, message, generation),
        ]
        theirs = [
            p
            for p in (route.get("status") or {}).get("parents") or []
            if p.get("controllerName") != CONTROLLER_NAME
        ]
        ours = [
            {"parentRef": p, "controllerName": CONTROLLER_NAME, "conditions": conditions} for p in parents
        ]
        with contextlib.suppress(ApiError):  # deleted meanwhile: nothing to report on
            await self.cluster.patch_object(
                ROUTES, key[0], key[1], {"status": {"parents": theirs + ours}}, subresource="status"
            )
        self._pending.pop(key, None)

    def _reported(self, route: dict[str, Any]) -> Any:
        """The verdict this controller last wrote on `route` (compared without the times)."""
        mine = [
            p
            for p in (route.get("status") or {}).get("parents") or []
            if p.get("controllerName") == CONTROLLER_NAME
        ]
        if not mine:
            return None
        conds = {c["type"]: c for c in mine[0].get("conditions") or []}
        resolved = conds.get("ResolvedRefs") or {}
        return (
            int(resolved.get("observedGeneration", -1)),
            resolved.get("status") == "True",
            resolved.get("reason"),
            resolved.get("message"),
            [sorted(p["parentRef"].items()) for p in mine],
        )
