"""The emulated regional Kubernetes API: a kmock KubernetesEmulator as strict as a real API server.

kmock keeps objects as plain merged JSON and accepts any write. This subclass serves object
requests itself, with the real server's rules (docs/kubernetes-standin.md): 201 on create, PUT,
PATCH by Content-Type (kube_patch.py), schema and unknown-field checks (kube_schema.py),
resourceVersion conflicts, generation on spec changes, status and scale subresources, Service
allocation (kube_services.py), label and field selectors on list and watch (kube_watch.py), and
Status bodies on errors. Discovery and the object store stay kmock's.

Over the house limit of about 300 lines: each verb handler is short, and they share the
emulator's store, its lock and its resourceVersion counter, which one class keeps consistent.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import random
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp.web
import attrs
import kmock
from kmock._internal import rendering

from drctl.devstack import kube_patch, kube_schema
from drctl.devstack.kube_resources import (
    DELETE_RETURNS_OBJECT,
    NAMESPACE_PATH,
    RESOURCES,
    SERVER_META,
    VERBS,
    api_version,
    check_version,
    field_validation_of,
    grace_period_of,
    has_status,
    now,
    split_key,
)
from drctl.devstack.kube_services import allocate
from drctl.devstack.kube_watch import watch_events
from drctl.devstack.label_selector import (
    ApiError,
    check_field_labels,
    object_matches,
    paginate,
    parse_selector,
)


@attrs.define(kw_only=True)
class RegionCluster(kmock.KubernetesEmulator):
    """One region's API server. `changed` is set on every write, for in-process controllers."""

    changed: asyncio.Event = attrs.field(factory=asyncio.Event, init=False)
    _rv: int = attrs.field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        for key, (kind, namespaced) in RESOURCES.items():
            subs = {"status", "scale"} if key.endswith("/deployments") else {"status"}
            if not has_status(key):
                subs.discard("status")
            self.resources[key] = kmock.ResourceInfo(
                kind=kind,
                namespaced=namespaced,
                verbs=VERBS,
                subresources=subs,
                singular=kind.lower(),
            )

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        try:
            m = NAMESPACE_PATH.fullmatch(raw_request.path)
            if m:
                # kmock's path parser reads /api/v1/namespaces/<x> as a namespace prefix and fails.
                raw = await raw_request.read()
                try:
                    data = json.loads(raw) if raw else None
                except ValueError:
                    data = None
                return await self._respond(
                    "v1/namespaces",
                    raw_request.method,
                    None,
                    m[1],
                    None,
                    data,
                    {**raw_request.query, "$content-type": raw_request.headers.get("Content-Type", "")},
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
        key = f"{api_version(res.group or '', res.version or '')}/{res.plural}"
        return await self._respond(
            key,
            request.method.value,
            request.namespace,
            request.name,
            request.subresource,
            request.data,
            {**request.params, "$content-type": request.headers.get("Content-Type", "")},
        )

    async def _respond(
        self, key: str, method: str, ns: str | None, name: str | None, sub: str | None, data: Any, params: Any
    ) -> aiohttp.web.Response:
        try:
            if key not in RESOURCES:
                raise ApiError(404, "NotFound", f"the server could not find the requested resource ({key})")
            data = data if isinstance(data, (dict, list)) else None
            warnings: list[str] = []
            status, body = await self._serve_object(
                key, method, ns, name, sub, data, {**params, "$warn": warnings}
            )
        except ApiError as exc:
            warnings = []
            group, _, plural = split_key(key)
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
                    "details": {"name": name or "", "group": group, "kind": plural, **(exc.details or {})},
                },
            )
        # The API server's warning header: code 299, agent "-", the text quoted (RFC 7234 5.5).
        headers = {"Warning": ", ".join(f"299 - {json.dumps(w)}" for w in warnings)} if warnings else None
        return aiohttp.web.json_response(body, status=status, headers=headers)

    async def _serve_object(
        self, key: str, method: str, ns: str | None, name: str | None, sub: str | None, data: Any, params: Any
    ) -> tuple[int, Any]:
        if method == "GET" and name is None:
            return 200, self._list_body(key, ns, params)
        validation = field_validation_of(params)
        if name is None and method == "POST":
            if not isinstance(data, dict):
                raise ApiError(400, "BadRequest", "the body must be a JSON object")
            return 201, await self.create_object(
                key, data, namespace=ns, field_validation=validation, warnings=params["$warn"]
            )
        if name is None:
            raise ApiError(405, "MethodNotAllowed", f"{method} needs an object name")
        if method == "GET":
            obj = self.read_object(key, ns, name)
            return 200, self._scale_of(obj) if sub == "scale" else obj
        if method == "DELETE":
            return 200, await self.delete_object(key, ns, name, grace_period_of(params, data))
        if method not in ("PUT", "PATCH") or data is None:
            raise ApiError(405, "MethodNotAllowed", f"{method} on {key} is not supported")
        if sub not in (None, "status", "scale") or (sub == "status" and not has_status(key)):
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({key}/{sub})")
        ctype = kube_patch.content_type(params.get("$content-type"))
        if sub == "scale":
            current = self._scale_of(self.read_object(key, ns, name))
            if method == "PATCH":
                kube_patch.check_type(ctype, builtin=True)
                scale = (
                    kube_patch.merge_patch(current, data)
                    if ctype != kube_patch.JSON_PATCH
                    else kube_patch.apply(ctype, current, data)
                )
            else:
                scale = data
            check_version(key, name, scale, current)
            replicas = (scale.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise ApiError(
                    422,
                    "Invalid",
                    f'Scale "{name}" is invalid: spec.replicas: must be a non-negative integer',
                )
            obj = await self.patch_object(key, ns, name, {"spec": {"replicas": replicas}})
            return 200, self._scale_of(obj)
        write = {"subresource": sub, "field_validation": validation, "warnings": params["$warn"]}
        if method == "PUT":
            return 200, await self.replace_object(key, ns, name, data, **write)
        return 200, await self.patch_object(key, ns, name, data, content_type=ctype, **write)

    async def _serve_watch(self, request: rendering.Request) -> AsyncIterator[Any]:
        """A watch as the API server streams it (see kube_watch.watch_events)."""
        yield b""  # send the headers now, or the client waits for the first event
        res = request.resource
        assert res is not None  # the watch fallback serves resource requests only
        key = f"{api_version(res.group or '', res.version or '')}/{res.plural}"
        async for event in watch_events(
            key, request.namespace, request.params, self._buses[res], self.list_objects
        ):
            yield event

    def _list_body(self, key: str, ns: str | None, params: Any) -> dict[str, Any]:
        group, version, plural = split_key(key)
        items = self.list_objects(key, ns, params.get("labelSelector", ""), params.get("fieldSelector", ""))
        meta, items = paginate(items, params.get("limit", ""), params.get("continue", ""), str(self._rv))
        return {
            "apiVersion": api_version(group, version),
            "kind": f"{RESOURCES[key][0]}List",
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
        group, version, plural = split_key(key)
        return (
            kmock.resource(group=group, version=version, plural=plural),
            (ns if RESOURCES[key][1] else None),
            name,
        )

    def _current(self, key: str, ns: str | None, name: str) -> dict[str, Any] | None:
        k = self._key(key, ns, name)
        obj = self._objects[k] if k in self._objects else None
        return None if obj is None or obj.deleted else obj.raw

    def find(self, key: str, ns: str | None, name: str) -> dict[str, Any] | None:
        """A copy of the stored object, or None (for in-process controllers)."""
        obj = self._current(key, ns, name)
        return None if obj is None else copy.deepcopy(obj)

    def read_object(self, key: str, ns: str | None, name: str) -> dict[str, Any]:
        obj = self._current(key, ns, name)
        if obj is None:
            _, _, plural = split_key(key)
            raise ApiError(404, "NotFound", f'{plural} "{name}" not found')
        return copy.deepcopy(obj)

    def list_objects(
        self, key: str, ns: str | None = None, label_selector: str = "", field_selector: str = ""
    ) -> list[dict[str, Any]]:
        labels, fields = parse_selector(label_selector), parse_selector(field_selector, fields=True)
        check_field_labels(RESOURCES[key][0], fields)
        res, _, _ = self._key(key, None, "")
        out = []
        for (r, obj_ns, _name), obj in list(self._objects.items()):
            if r != res or obj.deleted or (ns is not None and obj_ns != ns):
                continue
            if object_matches(obj.raw, labels, fields):
                out.append(copy.deepcopy(obj.raw))
        return sorted(out, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    async def create_object(
        self,
        key: str,
        body: dict[str, Any],
        namespace: str | None = None,
        field_validation: str = "Strict",
        warnings: list[str] | None = None,
    ) -> dict[str, Any]:
        """Create as the API server does; in-process writers (the node agent, seeding) are Strict."""
        group, version, plural = split_key(key)
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if not name and meta.get("generateName"):
            # names.SimpleNameGenerator: five characters of util/rand's alphabet.
            suffix = "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
            name = meta["name"] = f"{meta['generateName']}{suffix}"
        if not name:
            raise ApiError(422, "Invalid", "metadata.name: Required value: name or generateName is required")
        ns = (namespace or meta.get("namespace")) if RESOURCES[key][1] else None
        if ns:
            meta["namespace"] = ns
        async with self._lock:
            if self._current(key, ns, name) is not None:
                raise ApiError(409, "AlreadyExists", f'{plural} "{name}" already exists')
            obj["apiVersion"], obj["kind"] = api_version(group, version), RESOURCES[key][0]
            if meta.get("resourceVersion"):  # storage.ErrResourceVersionSetOnCreate, served as a 500
                raise ApiError(
                    500,
                    "InternalError",
                    "Internal error occurred: resourceVersion should not be set on objects to be created",
                )
            for field in SERVER_META:  # the server's to set: a client's values are ignored
                meta.pop(field, None)
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1)
            if has_status(key):
                obj.pop("status", None)  # a create through the main resource sets no status
            (warnings if warnings is not None else []).extend(kube_schema.check(obj, field_validation))
            if plural == "services":
                allocate(obj, [o for o in self.list_objects(key, ns) if o["metadata"]["name"] != name])
            return await self._store(key, ns, name, obj, "ADDED")

    async def replace_object(
        self,
        key: str,
        ns: str | None,
        name: str,
        body: dict[str, Any],
        subresource: str | None = None,
        field_validation: str = "Strict",
        warnings: list[str] | None = None,
    ) -> dict[str, Any]:
        async with self._lock:
            old = self.read_object(key, ns, name)
            check_version(key, name, body, old)
            new = copy.deepcopy(body)
            return await self._update(key, ns, name, old, new, subresource, field_validation, warnings)

    async def patch_object(
        self,
        key: str,
        ns: str | None,
        name: str,
        patch: dict[str, Any] | list[Any],
        subresource: str | None = None,
        content_type: str = kube_patch.MERGE_PATCH,
        field_validation: str = "Strict",
        warnings: list[str] | None = None,
    ) -> dict[str, Any]:
        """Patch as the API server does; in-process callers send merge patches by default."""
        async with self._lock:
            old = self.read_object(key, ns, name)
            new = kube_patch.apply(content_type, old, patch)
            check_version(key, name, new, old)
            return await self._update(key, ns, name, old, new, subresource, field_validation, warnings)

    # The API server answers a Service (or Pod) DELETE with the deleted object, not a Status, and
    # the kubernetes client deserialises it as such (delete_namespaced_service -> V1Service).
    async def delete_object(
        self, key: str, ns: str | None, name: str, grace_period_s: int | None = None
    ) -> dict[str, Any]:
        """Delete as the API server does: graceful for a Pod bound to a node, held by finalizers."""
        async with self._lock:
            old = self.read_object(key, ns, name)
            meta = old["metadata"]
            grace = _pod_grace(old, grace_period_s) if key == "v1/pods" else 0
            if grace > 0 and not meta.get("deletionTimestamp"):
                # The kubelet stops the pod, then deletes it with grace 0 (nodeagent.py).
                meta["deletionTimestamp"] = now(grace)
                meta["deletionGracePeriodSeconds"] = grace
                return await self._store(key, ns, name, old, "MODIFIED")
            if grace > 0:
                return old  # already terminating: a second graceful delete changes nothing
            if meta.get("finalizers"):
                meta.setdefault("deletionTimestamp", now())
                meta["deletionGracePeriodSeconds"] = 0
                return await self._store(key, ns, name, old, "MODIFIED")
            await self._drop(key, ns, name, old)
        group, _, plural = split_key(key)
        if plural in DELETE_RETURNS_OBJECT:
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
        field_validation: str = "Strict",
        warnings: list[str] | None = None,
    ) -> dict[str, Any]:
        plural = split_key(key)[2]
        if subresource == "status":  # only status moves through /status
            new = {**old, "status": new.get("status", {})}
        elif has_status(key):
            new["status"] = old.get("status")
            if new["status"] is None:
                del new["status"]
        meta = new.setdefault("metadata", {})
        for field in SERVER_META:
            if field in old["metadata"]:
                meta[field] = old["metadata"][field]
            else:
                meta.pop(field, None)
        meta["name"] = old["metadata"]["name"]
        if "namespace" in old["metadata"]:
            meta["namespace"] = old["metadata"]["namespace"]
        new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
        (warnings if warnings is not None else []).extend(kube_schema.check(new, field_validation, old))
        if plural == "services":
            others = [o for o in self.list_objects(key, ns) if o["metadata"]["name"] != name]
            allocate(new, others, old)

        def body(o: dict[str, Any]) -> str:
            skip = ("metadata", "status") if has_status(key) else ("metadata",)
            return json.dumps({k: v for k, v in o.items() if k not in skip}, sort_keys=True)

        # generation counts changes of the spec (everything but metadata and a status subresource).
        if body(old) != body(new):
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if new == old:
            return new  # a no-op write keeps the resourceVersion, as the API server's does
        # The last finalizer gone from an object being deleted: it goes (a terminating pod waits
        # for its kubelet instead: registry Store.ShouldDeleteDuringUpdate).
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not meta.get("deletionGracePeriodSeconds")
        ):
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


def _pod_grace(pod: dict[str, Any], asked: int | None) -> int:
    """The grace period a Pod DELETE gets: 0 (at once) unless a node runs it and it has not ended."""
    spec, phase = pod.get("spec") or {}, (pod.get("status") or {}).get("phase")
    if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
        return 0
    return asked if asked is not None else int(spec.get("terminationGracePeriodSeconds", 30))


@contextlib.asynccontextmanager
async def serve_cluster(host: str, port: int) -> AsyncIterator[RegionCluster]:
    """Run a RegionCluster on host:port until the context exits."""
    cluster = RegionCluster()
    async with cluster, kmock.Server(cluster, host=host, port=port):
        yield cluster
