"""The emulated regional Kubernetes API: a kmock KubernetesEmulator that the official client accepts.

kmock keeps objects as plain merged JSON. The product and the node agent rely on more of the real
API server's contract, so this subclass serves object requests itself: 201 on create, PUT, merge
and JSON patch, metadata.generation/resourceVersion/uid/creationTimestamp, labelSelector, the
Deployment /scale and /status subresources, and Status bodies on errors. Discovery, watches and
the object store stay kmock's.

Slightly over the house limit of about 300 lines: each verb handler is short, and they share
the emulator's store and its resourceVersion counter, which one class keeps consistent.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import json
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp.web
import attrs
import kmock
from kmock._internal import dicts, rendering

from drctl.devstack.label_selector import ApiError, paginate, parse_selector, selector_matches

_RESOURCES: dict[str, tuple[str, bool]] = {  # "group/version/plural" -> (kind, namespaced)
    "v1/namespaces": ("Namespace", False),
    "v1/services": ("Service", True),
    "v1/configmaps": ("ConfigMap", True),
    "v1/endpoints": ("Endpoints", True),
    "discovery.k8s.io/v1/endpointslices": ("EndpointSlice", True),  # the node agent publishes them
    "apps/v1/deployments": ("Deployment", True),
    "autoscaling/v2/horizontalpodautoscalers": ("HorizontalPodAutoscaler", True),
    "velero.io/v1/backups": ("Backup", True),
    "velero.io/v1/restores": ("Restore", True),
    "velero.io/v1/schedules": ("Schedule", True),
    "velero.io/v1/backupstoragelocations": ("BackupStorageLocation", True),
    "gateway.networking.k8s.io/v1/httproutes": ("HTTPRoute", True),
}
# Writes to the main endpoint of these keep the stored status, as with a real status subresource,
# so a client replacing a Deployment never clobbers what the node agent reported.
_STATUS_SUBRESOURCE = {"deployments", "horizontalpodautoscalers", "httproutes"}
_NAMESPACE_PATH = re.compile(r"/api/v1/namespaces(?:/([^/]+))?/?")
_VERBS = {"get", "list", "watch", "create", "update", "patch", "delete"}


def _split_key(key: str) -> tuple[str, str, str]:
    parts = key.split("/")
    return ("", parts[0], parts[1]) if len(parts) == 2 else (parts[0], parts[1], parts[2])


def _api_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_DELETE_RETURNS_OBJECT = {"services", "pods"}


@attrs.define(kw_only=True)
class RegionCluster(kmock.KubernetesEmulator):
    """One region's API server. `changed` is set on every write, for in-process controllers."""

    changed: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    _rv: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for key, (kind, namespaced) in _RESOURCES.items():
            subs = {"status", "scale"} if key.endswith("/deployments") else {"status"}
            self.resources[key] = kmock.ResourceInfo(
                kind=kind,
                namespaced=namespaced,
                verbs=_VERBS,
                subresources=subs,
                singular=kind.lower(),
            )

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        try:
            m = _NAMESPACE_PATH.fullmatch(raw_request.path)
            if m:
                # kmock's path parser reads /api/v1/namespaces/<x> as a namespace prefix and fails.
                raw = await raw_request.read()
                try:
                    data = json.loads(raw) if raw else None
                except ValueError:
                    data = None
                return await self._respond(
                    "v1/namespaces", raw_request.method, None, m[1], None, data, raw_request.query
                )
            return await super().__call__(raw_request)
        finally:
            # kmock records every request and error for test assertions; a long-lived dev cluster
            # polled several times a second would grow without bound.
            if len(self._requests) > 200:
                del self._requests[:-20]
            for errors in self._errors:
                errors.clear()

    # --- HTTP -------------------------------------------------------------------------------------

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        path = request.url.path
        if path.rstrip("/") == "/version":
            return aiohttp.web.json_response(await self._serve_server_version(request))
        if path == "/apis/":
            return aiohttp.web.json_response(await self._serve_apis(request))
        if path.rstrip("/") == "/api":  # the pydantic models of client 37 require the CIDR list
            return aiohttp.web.json_response(
                {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
            )
        res = request.resource
        if res is not None and res.plural is None and request.method.value == "GET":
            # Discovery: kmock's own fallbacks would route /apis/<group>/<version> to its list handler.
            try:
                serve = self._serve_version if res.version else self._serve_group
                return aiohttp.web.json_response(await serve(request))
            except kmock.KubernetesError as exc:
                return aiohttp.web.json_response(
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "reason": "NotFound",
                        "message": str(exc.message),
                        "code": 404,
                    },
                    status=404,
                )
        if res is None or request.action == kmock.action.WATCH:
            return await super()._handle(request)
        key = f"{_api_version(res.group or '', res.version or '')}/{res.plural}"
        return await self._respond(
            key,
            request.method.value,
            request.namespace,
            request.name,
            request.subresource,
            request.data,
            request.params,
        )

    async def _respond(
        self, key: str, method: str, ns: str | None, name: str | None, sub: str | None, data: Any, params: Any
    ) -> aiohttp.web.Response:
        try:
            if key not in _RESOURCES:
                raise ApiError(404, "NotFound", f"the server could not find the requested resource ({key})")
            data = data if isinstance(data, (dict, list)) else None
            status, body = await self._serve_object(key, method, ns, name, sub, data, params)
        except ApiError as exc:
            group, _, plural = _split_key(key)
            status, body = (
                exc.code,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": exc.message,
                    "reason": exc.reason,
                    "code": exc.code,
                    "details": {"name": name or "", "group": group, "kind": plural},
                },
            )
        return aiohttp.web.json_response(body, status=status)

    async def _serve_object(
        self, key: str, method: str, ns: str | None, name: str | None, sub: str | None, data: Any, params: Any
    ) -> tuple[int, Any]:
        if method == "GET" and name is None:
            return 200, self._list_body(key, ns, params)
        if name is None and method == "POST":
            if not isinstance(data, dict):
                raise ApiError(400, "BadRequest", "the body must be a JSON object")
            return 201, await self.create_object(key, data, namespace=ns)
        if name is None:
            raise ApiError(405, "MethodNotAllowed", f"{method} needs an object name")
        if method == "GET":
            obj = self.read_object(key, ns, name)
            return 200, self._scale_of(obj) if sub == "scale" else obj
        if method == "DELETE":
            return 200, await self.delete_object(key, ns, name)
        if method not in ("PUT", "PATCH") or data is None:
            raise ApiError(405, "MethodNotAllowed", f"{method} on {key} is not supported")
        if sub == "scale":
            current = self._scale_of(self.read_object(key, ns, name))
            scale = data if method == "PUT" else dicts.patch_dict(current, data)
            replicas = (scale.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise ApiError(422, "Invalid", "spec.replicas must be a non-negative integer")
            obj = await self.patch_object(key, ns, name, {"spec": {"replicas": replicas}})
            return 200, self._scale_of(obj)
        if method == "PUT":
            return 200, await self.replace_object(key, ns, name, data, subresource=sub)
        return 200, await self.patch_object(key, ns, name, data, subresource=sub)

    def _list_body(self, key: str, ns: str | None, params: Any) -> dict[str, Any]:
        group, version, plural = _split_key(key)
        items = self.list_objects(key, ns, params.get("labelSelector", ""), params.get("fieldSelector", ""))
        meta, items = paginate(items, params.get("limit", ""), params.get("continue", ""), str(self._rv))
        return {
            "apiVersion": _api_version(group, version),
            "kind": f"{_RESOURCES[key][0]}List",
            "metadata": meta,
            "items": items,
        }

    def _scale_of(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        match = (obj.get("spec", {}).get("selector") or {}).get("matchLabels") or {}
        return {
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": {
                k: meta.get(k) for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            },
            "spec": {"replicas": obj.get("spec", {}).get("replicas", 1)},
            "status": {
                "replicas": (obj.get("status") or {}).get("replicas", 0),
                "selector": ",".join(f"{k}={v}" for k, v in match.items()),
            },
        }

    # --- the store, also used in-process by the node agent and the seeder -------------------------

    def _key(self, key: str, ns: str | None, name: str) -> tuple[kmock.resource, str | None, str]:
        group, version, plural = _split_key(key)
        return (
            kmock.resource(group=group, version=version, plural=plural),
            (ns if _RESOURCES[key][1] else None),
            name,
        )

    def _current(self, key: str, ns: str | None, name: str) -> dict[str, Any] | None:
        k = self._key(key, ns, name)
        obj = self._objects[k] if k in self._objects else None
        return None if obj is None or obj.deleted else obj.raw

    def read_object(self, key: str, ns: str | None, name: str) -> dict[str, Any]:
        obj = self._current(key, ns, name)
        if obj is None:
            _, _, plural = _split_key(key)
            raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
        return copy.deepcopy(obj)

    def list_objects(
        self, key: str, ns: str | None = None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]:
        labels, fields = parse_selector(label_selector), parse_selector(field_selector)
        res, _, _ = self._key(key, None, "")
        out = []
        for (r, obj_ns, name), obj in list(self._objects.items()):
            if r != res or obj.deleted or (ns is not None and obj_ns != ns):
                continue
            raw = obj.raw
            meta = raw.get("metadata", {})
            flat = {"metadata.name": name, "metadata.namespace": obj_ns or ""}
            if selector_matches(labels, meta.get("labels") or {}) and selector_matches(fields, flat):
                out.append(copy.deepcopy(raw))
        return sorted(out, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    async def create_object(
        self, key: str, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        group, version, _ = _split_key(key)
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if not name and meta.get("generateName"):
            name = meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value")
        ns = (namespace or meta.get("namespace")) if _RESOURCES[key][1] else None
        if ns:
            meta["namespace"] = ns
        async with self._lock:
            if self._current(key, ns, name) is not None:
                raise ApiError(409, "AlreadyExists", f'{_split_key(key)[2]} "{name}" already exists')
            obj["apiVersion"], obj["kind"] = _api_version(group, version), _RESOURCES[key][0]
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
            meta.pop("resourceVersion", None)
            meta.pop("deletionTimestamp", None)
            return await self._store(key, ns, name, obj, "ADDED")

    async def replace_object(
        self, key: str, ns: str | None, name: str, body: dict[str, Any], subresource: str | None = None
    ) -> dict[str, Any]:
        async with self._lock:
            old = self.read_object(key, ns, name)
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'the object "{name}" has been modified; please apply your changes to the latest version',
                )
            new = copy.deepcopy(body)
            return await self._update(key, ns, name, old, new, subresource)

    async def patch_object(
        self,
        key: str,
        ns: str | None,
        name: str,
        patch: dict[str, Any] | list[Any],
        subresource: str | None = None,
    ) -> dict[str, Any]:
        async with self._lock:
            old = self.read_object(key, ns, name)
            try:
                new = copy.deepcopy(dict(dicts.patch_dict(old, patch)))
            except Exception as exc:  # a bad JSON patch is the client's mistake, not a server error
                raise ApiError(422, "Invalid", f"cannot apply patch: {exc}") from None
            return await self._update(key, ns, name, old, new, subresource)

    # The API server answers a Service (or Pod) DELETE with the deleted object, not a Status, and
    # the kubernetes client deserialises it as such (delete_namespaced_service -> V1Service).
    async def delete_object(self, key: str, ns: str | None, name: str) -> dict[str, Any]:
        async with self._lock:
            old = self.read_object(key, ns, name)
            if old["metadata"].get("finalizers"):
                old["metadata"].setdefault("deletionTimestamp", _now())
                return await self._store(key, ns, name, old, "MODIFIED")
            await self._drop(key, ns, name, old)
        group, _, plural = _split_key(key)
        if plural in _DELETE_RETURNS_OBJECT:
            return old
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {"name": name, "group": group, "kind": plural, "uid": old["metadata"]["uid"]},
        }

    async def _update(
        self,
        key: str,
        ns: str | None,
        name: str,
        old: dict[str, Any],
        new: dict[str, Any],
        subresource: str | None,
    ) -> dict[str, Any]:
        plural = _split_key(key)[2]
        if subresource == "status":  # only status moves through /status
            new = {**old, "status": new.get("status", {})}
        elif plural in _STATUS_SUBRESOURCE:
            new["status"] = old.get("status")
            if new["status"] is None:
                del new["status"]
        meta = new.setdefault("metadata", {})
        for field in ("uid", "creationTimestamp", "generation", "name", "namespace", "deletionTimestamp"):
            if field in old["metadata"]:
                meta[field] = old["metadata"][field]
        new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]

        def body(o: dict[str, Any]) -> str:
            return json.dumps({k: v for k, v in o.items() if k not in ("metadata", "status")}, sort_keys=True)

        if body(old) != body(new):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            await self._drop(key, ns, name, new)
            return new
        return await self._store(key, ns, name, new, "MODIFIED")

    async def _store(
        self, key: str, ns: str | None, name: str, obj: dict[str, Any], event: str
    ) -> dict[str, Any]:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        k = self._key(key, ns, name)
        if k in self._objects:
            self._objects[k].create(obj)
            del self._objects[k].history[:-2]  # kmock keeps every version; the dev stack runs for hours
        else:
            self._objects[k] = obj
        await self._buses[k[0]].put({"type": event, "object": copy.deepcopy(obj)})
        self.changed.set()
        return copy.deepcopy(obj)

    async def _drop(self, key: str, ns: str | None, name: str, last: dict[str, Any]) -> None:
        k = self._key(key, ns, name)
        del self._objects[k]
        self._rv += 1
        last["metadata"]["resourceVersion"] = str(self._rv)
        await self._buses[k[0]].put({"type": "DELETED", "object": last})
        self.changed.set()

    async def ensure(self, key: str, body: dict[str, Any]) -> dict[str, Any]:
        """Create unless it exists (seeding is idempotent)."""
        meta = body["metadata"]
        found = self._current(key, meta.get("namespace"), meta["name"])
        return copy.deepcopy(found) if found is not None else await self.create_object(key, body)


@contextlib.asynccontextmanager
async def serve_cluster(host: str, port: int) -> AsyncIterator[RegionCluster]:
    """Run a RegionCluster on host:port until the context exits."""
    cluster = RegionCluster()
    async with cluster, kmock.Server(cluster, host=host, port=port):
        yield cluster
