"""Gateway API regional tier: track weights are the backendRefs weights of one HTTPRoute per region.

The route (`traffic.regional.httproute`, in the region's namespace) points at the track Services
`<app>-<track>`. A weight change is one PUT of the whole route carrying the resourceVersion read
just before, so the new weights land together or not at all. A write is applied only once the
route's controller accepted it: every parent in `status.parents` reports Accepted at the
generation written (route_status.py). kubernetes exceptions propagate; the activities layer maps them.

Every rule drctl manages also carries a `ResponseHeaderModifier` filter that sets
`traffic.region_header` to the region's name: the gateway then labels each answer with the region
that served it, which is what failover verification reads.
"""

from __future__ import annotations

import copy
import time
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from drctl.config.schema import TRACKS, FleetConfig, GatewayApiRegional
from drctl.models.gitops import (
    ROUTE_FILTERS,
    ROUTE_REFS,
    ROUTE_WEIGHTS,
    GitOpsManaged,
    argocd_tracking,
    changes,
)
from drctl.providers import route_status
from drctl.providers.kube_objects import STRICT, on_conflict
from drctl.providers.kubernetes import REQUEST_TIMEOUT, api_client_for
from drctl.providers.route_status import RouteNotProgrammed
from drctl.providers.weights import validate_weights

GROUP, VERSION, PLURAL = "gateway.networking.k8s.io", "v1", "httproutes"
# Gateway API: backendRef weight is 0..1,000,000; an omitted weight means 1.
GATEWAY_MAX_WEIGHT = 1_000_000
_DEFAULT_WEIGHT = 1
# How long a weight change waits for the route's controller to accept it: inside the activity's
# 30 s per attempt, and far above a healthy controller's seconds.
ACCEPT_TIMEOUT_S = 20.0


class GatewayApiRegionalTraffic:
    """Implements RegionalTraffic with HTTPRoute backendRefs weights, one route per region."""

    def __init__(
        self,
        api_clients: dict[str, client.ApiClient],
        namespaces: dict[str, str],
        route: str,
        app: str,
        region_header: str = "x-drctl-region",
        accept_timeout_s: float = ACCEPT_TIMEOUT_S,
    ) -> None:
        self.custom = {r: client.CustomObjectsApi(c) for r, c in api_clients.items()}
        self.core = {r: client.CoreV1Api(c) for r, c in api_clients.items()}
        self.namespaces = dict(namespaces)
        self.route = route
        self.app = app
        self.region_header = region_header
        self.accept_timeout_s = accept_timeout_s
        self._track_of = {f"{app}-{t}": t for t in TRACKS}

    @classmethod
    def from_config(cls, cfg: FleetConfig) -> GatewayApiRegionalTraffic:
        tier = cfg.traffic.regional_tier
        if not isinstance(tier, GatewayApiRegional):
            raise ValueError(f"traffic.regional.kind is {tier.kind!r}, not 'gateway-api'")
        return cls(
            {r.name: api_client_for(r.kube) for r in cfg.regions},
            {r.name: r.kube.namespace for r in cfg.regions},
            tier.httproute,
            cfg.workload.app,
            cfg.traffic.region_header,
        )

    def _check_region(self, region: str) -> None:
        if region not in self.custom:
            raise ValueError(f"unknown region {region!r}; known: {', '.join(self.custom)}")

    def _read(self, region: str) -> dict[str, Any]:
        obj = self.custom[region].get_namespaced_custom_object(
            GROUP, VERSION, self.namespaces[region], PLURAL, self.route, _request_timeout=REQUEST_TIMEOUT
        )
        return cast(dict[str, Any], obj)

    def _track_refs(self, rule: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The rule's backendRefs that are track Services, by track."""
        out = {}
        for ref in rule.get("backendRefs") or []:
            if (
                ref.get("kind", "Service") == "Service"
                and ref.get("group", "") == ""
                and ref.get("name") in self._track_of
            ):
                out[self._track_of[ref["name"]]] = ref
        return out

    def _weights_of(self, route: dict[str, Any]) -> dict[str, int]:
        for rule in (route.get("spec") or {}).get("rules") or []:
            refs = self._track_refs(rule)
            if refs:
                return {t: int(refs[t].get("weight", _DEFAULT_WEIGHT)) for t in TRACKS if t in refs}
        return {}

    def get_track_weights(self, region: str) -> dict[str, int]:
        """Weights of the tracks the route references (tracks without a backendRef are left out)."""
        self._check_region(region)
        return self._weights_of(self._read(region))

    def set_track_weights(self, region: str, weights: dict[str, int]) -> list[GitOpsManaged]:
        """Set track weights in every rule that routes to track Services; others keep theirs.

        A track with no backendRef yet gets one, pointing at its Service's first port, when its
        weight is above 0; a track without a Service is refused rather than routed into a 500.
        Returns the fields set, when the route carries Argo CD's marker (read from the route
        written): the weights even when they were already so (a retried activity set them before).
        """
        self._check_region(region)
        validate_weights(weights, TRACKS, max_weight=GATEWAY_MAX_WEIGHT, what="track")

        def change(route: dict[str, Any]) -> dict[str, Any]:
            current = self._weights_of(route)
            validate_weights(
                weights,
                TRACKS,
                max_weight=GATEWAY_MAX_WEIGHT,
                what="track",
                current={t: 0 for t in TRACKS} | current,
            )
            return self._with_weights(region, route, weights)

        before, after = self._update(region, change)
        # Written is not applied: the controller programs the data plane later (even when nothing
        # changed here: a retried activity's first attempt may have written it a moment ago).
        self._await_programmed(region, after, weights)
        fields = [ROUTE_WEIGHTS] if weights else []
        if self._refs(before) != self._refs(after):
            fields.append(ROUTE_REFS)  # a track's backendRef added
        if self._filters(before) != self._filters(after):
            fields.append(ROUTE_FILTERS)  # the region-header filter written
        meta = after.get("metadata") or {}
        tracking = argocd_tracking(meta.get("labels"), meta.get("annotations"))
        return changes(region, "HTTPRoute", self.route, fields, tracking)

    @staticmethod
    def _rules(route: dict[str, Any]) -> list[dict[str, Any]]:
        return list((route.get("spec") or {}).get("rules") or [])

    def _refs(self, route: dict[str, Any]) -> list[list[str]]:
        return [sorted(self._track_refs(r)) for r in self._rules(route)]

    def _filters(self, route: dict[str, Any]) -> list[Any]:
        return [r.get("filters") or [] for r in self._rules(route)]

    def _await_programmed(self, region: str, written: dict[str, Any], weights: dict[str, int]) -> None:
        """Wait, bounded, until every parent Gateway accepted the generation written.

        Polls back off from 50 ms to 0.5 s. Raises RouteNotProgrammed naming the route and its
        conditions: retryable when the controller is only late, not when it refused the route or
        a weighted track's Service is missing (its share of requests would get 5xx).
        """
        generation = int((written.get("metadata") or {}).get("generation") or 0)
        where = f"{self.namespaces[region]}/{self.route} in {region}"
        deadline, pause_s, route = time.monotonic() + self.accept_timeout_s, 0.05, written
        while True:
            why = route_status.pending(route, generation)
            if route_status.refused(route, generation):
                raise RouteNotProgrammed(where, generation, route_status.conditions_text(route), False)
            if why is None:
                break
            if time.monotonic() >= deadline:
                detail = f"{why} after {self.accept_timeout_s:g}s; {route_status.conditions_text(route)}"
                raise RouteNotProgrammed(where, generation, detail, True)
            time.sleep(min(pause_s, max(0.0, deadline - time.monotonic())))
            pause_s = min(pause_s * 2, 0.5)
            route = self._read(region)
        if route_status.unresolved(route, generation):
            lost = [t for t, w in weights.items() if w > 0 and not self._service_exists(region, t)]
            if lost:
                detail = f"tracks {', '.join(lost)} have weight but no Service; {route_status.conditions_text(route)}"
                raise RouteNotProgrammed(where, generation, detail, False)

    def _service_exists(self, region: str, track: str) -> bool:
        try:
            self.core[region].read_namespaced_service(
                f"{self.app}-{track}", self.namespaces[region], _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def release_track(self, region: str, track: str) -> None:
        """Drop the track's backendRefs from the route and wait until that is programmed, so its
        Service can go; refuse while the track still has weight or another route refers to it."""
        self._check_region(region)
        service = f"{self.app}-{track}"

        def drop(route: dict[str, Any]) -> dict[str, Any]:
            new = copy.deepcopy(route)
            for rule in self._rules(new):
                ref = self._track_refs(rule).get(track)
                if ref is None:
                    continue
                if int(ref.get("weight", _DEFAULT_WEIGHT)) > 0:
                    raise ValueError(
                        f"track {track!r} still has weight {ref.get('weight', _DEFAULT_WEIGHT)} in HTTPRoute "
                        f"{self.namespaces[region]}/{self.route} in {region}; shift its traffic away first"
                    )
                rule["backendRefs"] = [r for r in rule["backendRefs"] if r is not ref]
            return new

        _, after = self._update(region, drop)
        self._await_programmed(region, after, {})
        others = self.custom[region].list_namespaced_custom_object(
            GROUP, VERSION, self.namespaces[region], PLURAL, _request_timeout=REQUEST_TIMEOUT
        )
        users = route_status.routes_to(cast(dict[str, Any], others).get("items") or [], service)
        if users:
            raise ValueError(
                f"Service {self.namespaces[region]}/{service} in {region} is still a backend of "
                f"HTTPRoute(s) {', '.join(users)}; not removing track {track!r}"
            )

    def ensure_region_header(self, region: str) -> bool:
        """Label the route's track rules with the region header; True when the route changed."""
        self._check_region(region)
        before, after = self._update(region, lambda route: self._with_weights(region, route, {}))
        return before is not after

    def _update(self, region: str, change: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """Read, change and PUT the route with the resourceVersion read, retrying on 409.

        Returns the route as read and as the server answered the PUT (the one read when nothing changed).
        """

        def write() -> tuple[dict[str, Any], dict[str, Any]]:
            route = self._read(region)
            new = change(route)
            if new == route:
                return route, route
            written = self.custom[region].replace_namespaced_custom_object(
                GROUP,
                VERSION,
                self.namespaces[region],
                PLURAL,
                self.route,
                new,
                field_validation=STRICT,
                _request_timeout=REQUEST_TIMEOUT,
            )
            return route, cast(dict[str, Any], written)

        return on_conflict(write)

    def _with_weights(self, region: str, route: dict[str, Any], weights: dict[str, int]) -> dict[str, Any]:
        new = copy.deepcopy(route)
        rules = [r for r in (new.get("spec") or {}).get("rules") or [] if self._track_refs(r)]
        if not rules:
            raise ValueError(
                f"HTTPRoute {self.namespaces[region]}/{self.route} in {region} has no rule routing to a "
                f"track Service ({', '.join(self._track_of)})"
            )
        for rule in rules:
            self._label(rule, region)
            refs = self._track_refs(rule)
            for track, weight in weights.items():
                if track in refs:
                    refs[track]["weight"] = weight
                elif weight > 0:
                    rule["backendRefs"].append(self._new_ref(region, track, weight))
        return new

    def _label(self, rule: dict[str, Any], region: str) -> None:
        """Set the region header in the rule's ResponseHeaderModifier, keeping its other entries.

        Gateway API allows one filter of a type per rule, so an existing modifier is extended.
        """
        filters = rule.setdefault("filters", [])
        mod = next((f for f in filters if f.get("type") == "ResponseHeaderModifier"), None)
        if mod is None:
            mod = {"type": "ResponseHeaderModifier", "responseHeaderModifier": {}}
            filters.append(mod)
        spec = mod.setdefault("responseHeaderModifier", {})
        entries = spec.setdefault("set", [])
        ours = [h for h in entries if str(h.get("name", "")).lower() == self.region_header.lower()]
        if ours:
            ours[0]["value"] = region  # in place: an unchanged route must compare equal (no write)
        else:
            entries.append({"name": self.region_header, "value": region})

    def _new_ref(self, region: str, track: str, weight: int) -> dict[str, Any]:
        name = f"{self.app}-{track}"
        try:
            svc = self.core[region].read_namespaced_service(
                name, self.namespaces[region], _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if exc.status == 404:
                raise ValueError(
                    f"track {track!r} has no Service {self.namespaces[region]}/{name} in {region}; "
                    "deploy the track before sending it traffic"
                ) from None
            raise
        ports = (svc.spec.ports if svc.spec else None) or []
        if not ports:
            raise ValueError(f"Service {self.namespaces[region]}/{name} in {region} exposes no port")
        return {"group": "", "kind": "Service", "name": name, "port": ports[0].port, "weight": weight}
