"""The dev stack's Velero: completes Backup and Restore objects for real, against moto S3.

It runs inside each region process and talks to that region's emulated cluster over the
Kubernetes API, like the real Velero server does. Backups land in the shared bucket in Velero's
object layout (`drctl.devstack.velero_store`), so a Restore in another region's cluster finds a
backup taken elsewhere.

A missing bucket, an unknown storage location or any S3 error fails the backup with a reason,
which is how tests make a backup fail without faking the product's side. Two more ways a real
Velero misbehaves are injected through a ConfigMap `FAULTS_CONFIGMAP` in the Velero namespace
(dev stack only): `data.backup: stall` leaves new Backups InProgress forever (a hung node agent),
and `data.backup: partially-failed` ends them PartiallyFailed with one error (a volume that could not
be backed up).
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from typing import Any

import aiohttp
from botocore.exceptions import BotoCoreError, ClientError

from drctl.config.schema import FleetConfig
from drctl.devstack.velero_schedules import reconcile_schedules
from drctl.devstack.velero_store import BackupStore, go_duration
from drctl.providers.kube_objects import CONFLICT_ATTEMPTS, as_copy

log = logging.getLogger("drctl.devstack.velero")

# (group, version, plural, kind): what a backup of the inference namespace holds in the dev stack.
RESOURCES: list[tuple[str, str, str, str]] = [
    ("apps", "v1", "deployments", "Deployment"),
    ("", "v1", "services", "Service"),
    ("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
    ("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute"),
]
FAULTS_CONFIGMAP = "drctl-devstack-velero-faults"


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _path(group: str, version: str, plural: str, ns: str | None = None, name: str | None = None) -> str:
    base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    out = base + (f"/namespaces/{ns}" if ns else "") + f"/{plural}"
    return out + (f"/{name}" if name else "")


def _matches(obj: dict[str, Any], selector: dict[str, Any] | None) -> bool:
    want = (selector or {}).get("matchLabels") or {}
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in want.items())


class KubeError(RuntimeError):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"HTTP {status}: {text[:200]}")
        self.status = status


class VeleroAgent:
    def __init__(self, cfg: FleetConfig, region: str, poll_s: float = 0.2) -> None:
        self.cfg = cfg
        self.region = region
        self.poll_s = poll_s
        self.api_url = (cfg.region(region).kube.api_url or "").rstrip("/")
        self.ns = cfg.backup.namespace
        self.store = BackupStore(cfg)
        self._session: aiohttp.ClientSession | None = None
        self._namespaces: set[str] = set()

    # --- Kubernetes API ---------------------------------------------------------------------

    async def _req(self, method: str, path: str, body: Any = None, params: dict | None = None) -> Any:
        assert self._session is not None
        headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
        async with self._session.request(
            method, self.api_url + path, json=body, params=params, headers=headers
        ) as resp:
            text = await resp.text()
            if resp.status >= 300:
                raise KubeError(resp.status, text)
            return json.loads(text) if text else None

    async def _set_status(self, plural: str, name: str, status: dict[str, Any]) -> None:
        await self._req("PATCH", _path("velero.io", "v1", plural, self.ns, name), {"status": status})

    # --- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        """Reconcile until cancelled. One bad object never stops the loop."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as self._session:
            while True:
                try:
                    await self.reconcile_once()
                except Exception:  # noqa: BLE001 - the agent is a long-lived server loop
                    log.exception("velero agent pass failed in %s", self.region)
                await asyncio.sleep(self.poll_s)

    async def reconcile_once(self) -> None:
        try:
            await reconcile_schedules(self)
        except KubeError as exc:
            if exc.status != 404:  # 404: namespace (or the Schedule kind) not there yet
                raise
        for plural, handler in (("backups", self._do_backup), ("restores", self._do_restore)):
            try:
                listing = await self._req("GET", _path("velero.io", "v1", plural, self.ns))
            except KubeError as exc:
                if exc.status == 404:
                    continue  # namespace not there yet
                raise
            for obj in (listing or {}).get("items", []):
                if (obj.get("status") or {}).get("phase", "New") in ("", "New"):
                    await handler(obj)

    # --- Backup -----------------------------------------------------------------------------

    async def _do_backup(self, backup: dict[str, Any]) -> None:
        name = backup["metadata"]["name"]
        spec = backup.get("spec") or {}
        started = _now()
        location = spec.get("storageLocation") or self.cfg.backup.storage_location
        try:
            bsl = await self._req(
                "GET", _path("velero.io", "v1", "backupstoragelocations", self.ns, location)
            )
        except KubeError as exc:
            if exc.status != 404:
                raise
            await self._set_status(
                "backups",
                name,
                {
                    "phase": "FailedValidation",
                    "validationErrors": [f"backup storage location {location!r} not found"],
                },
            )
            return
        # As in Velero, the storage location names the bucket; the config's bucket is the default.
        bucket = ((bsl.get("spec") or {}).get("objectStorage") or {}).get("bucket") or self.cfg.backup.bucket
        await self._set_status("backups", name, {"phase": "InProgress", "startTimestamp": started})
        fault = await self._fault("backup")
        if fault == "stall":
            log.warning("backup %s left InProgress (injected fault)", name)
            return  # only New objects are reconciled: this one stays InProgress
        try:
            items = await self._collect(spec)
            status = {
                "phase": "Completed" if fault != "partially-failed" else "PartiallyFailed",
                "startTimestamp": started,
                "completionTimestamp": _now(),
                "expiration": (
                    datetime.now(UTC) + go_duration(spec.get("ttl") or self.cfg.backup.ttl)
                ).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "progress": {"totalItems": len(items), "itemsBackedUp": len(items)},
                "version": 1,
            }
            if fault == "partially-failed":
                status["errors"] = 1
            backup["status"] = status
            await asyncio.to_thread(self.store.upload, bucket, name, backup, items)
        except (ClientError, BotoCoreError) as exc:
            log.warning("backup %s failed: %s", name, exc)
            await self._set_status(
                "backups",
                name,
                {"phase": "Failed", "failureReason": f"object store: {exc}", "completionTimestamp": _now()},
            )
            return
        await self._set_status("backups", name, status)
        log.info("backup %s completed: %d items", name, len(items))

    async def _fault(self, key: str) -> str | None:
        """The injected fault for `key` from the dev-stack faults ConfigMap, if any."""
        try:
            cm = await self._req("GET", _path("", "v1", "configmaps", self.ns, FAULTS_CONFIGMAP))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise
        value = ((cm or {}).get("data") or {}).get(key)
        return str(value) if value else None

    async def _collect(self, spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        selector = spec.get("labelSelector")
        params = None
        if selector and selector.get("matchLabels"):
            params = {"labelSelector": ",".join(f"{k}={v}" for k, v in selector["matchLabels"].items())}
        items: list[tuple[str, dict[str, Any]]] = []
        for ns in spec.get("includedNamespaces") or []:
            for group, version, plural, kind in RESOURCES:
                try:
                    listing = await self._req("GET", _path(group, version, plural, ns), params=params)
                except KubeError as exc:
                    if exc.status == 404:
                        continue
                    raise
                for obj in (listing or {}).get("items", []):
                    if not _matches(obj, selector):
                        continue
                    # List items may omit kind and apiVersion; a restore needs both.
                    obj.setdefault("apiVersion", f"{group}/{version}" if group else version)
                    obj.setdefault("kind", kind)
                    res = f"{plural}.{group}" if group else plural
                    items.append((f"resources/{res}/namespaces/{ns}/{obj['metadata']['name']}.json", obj))
        return items

    # --- Restore ----------------------------------------------------------------------------

    async def _do_restore(self, restore: dict[str, Any]) -> None:
        name = restore["metadata"]["name"]
        spec = restore.get("spec") or {}
        started = _now()
        await self._set_status("restores", name, {"phase": "InProgress", "startTimestamp": started})
        try:
            objects = await asyncio.to_thread(self.store.download, spec.get("backupName", ""))
        except (ClientError, BotoCoreError) as exc:
            await self._set_status(
                "restores",
                name,
                {
                    "phase": "FailedValidation",
                    "failureReason": f"backup {spec.get('backupName')!r} unreadable: {exc}",
                    "completionTimestamp": _now(),
                },
            )
            return
        mapping: dict[str, str] = spec.get("namespaceMapping") or {}
        # As Velero: only the backup's objects in includedNamespaces (empty or "*": all of them).
        included = set(spec.get("includedNamespaces") or ["*"])
        if "*" not in included:
            objects = [o for o in objects if o["metadata"].get("namespace") in included]
        policy = spec.get("existingResourcePolicy") or "none"
        restored = warnings = errors = 0
        for obj in objects:
            try:
                outcome = await self._restore_one(obj, mapping, policy, spec.get("backupName", ""), name)
            except KubeError as exc:
                log.warning(
                    "restore %s: %s/%s failed: %s", name, obj.get("kind"), obj["metadata"].get("name"), exc
                )
                errors += 1
                continue
            restored += outcome == "restored"
            warnings += outcome == "skipped"
        phase = "Completed" if not errors else ("PartiallyFailed" if restored else "Failed")
        await self._set_status(
            "restores",
            name,
            {
                "phase": phase,
                "startTimestamp": started,
                "completionTimestamp": _now(),
                "warnings": warnings,
                "errors": errors,
                "progress": {"totalItems": len(objects), "itemsRestored": restored},
            },
        )
        log.info("restore %s %s: %d restored, %d skipped, %d errors", name, phase, restored, warnings, errors)

    async def _restore_one(
        self, obj: dict[str, Any], mapping: dict[str, str], policy: str, backup_name: str, restore_name: str
    ) -> str:
        api_version: str = obj["apiVersion"]
        group, _, version = api_version.rpartition("/")
        plural = next(p for g, _, p, k in RESOURCES if g == group and k == obj.get("kind"))
        # As Velero's restore item actions: what the source cluster allocated (uid, resourceVersion,
        # a Service's clusterIP and nodePorts) does not travel to the target, which allocates its own.
        obj = as_copy(obj)
        meta = obj["metadata"]
        ns = mapping.get(meta.get("namespace", ""), meta.get("namespace", ""))
        meta["namespace"] = ns
        meta.setdefault("labels", {}).update(
            {"velero.io/backup-name": backup_name, "velero.io/restore-name": restore_name}
        )
        await self._ensure_namespace(ns)
        try:
            await self._req("POST", _path(group, version, plural, ns), obj)
            return "restored"
        except KubeError as exc:
            if exc.status != 409:
                raise
        if policy != "update":
            return "skipped"  # Velero's default: an existing object is left alone, with a warning
        where = _path(group, version, plural, ns, meta["name"])
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            # A controller (the node agent writing status) may move the object between the read and
            # the write: a 409 reads it again, as a real client's retry-on-conflict does.
            current = await self._req("GET", where)
            meta["resourceVersion"] = current.get("metadata", {}).get("resourceVersion")
            try:
                await self._req("PUT", where, obj)
                break
            except KubeError as exc:
                if exc.status != 409 or attempt == CONFLICT_ATTEMPTS:
                    raise
        return "restored"

    async def _ensure_namespace(self, ns: str) -> None:
        """Create the target namespace as Velero does. kmock 0.8's path parser cannot serve the
        cluster-scoped /api/v1/namespaces collection (HTTP 500), and the emulator does not require a
        namespace to exist before objects go in it, so a failed create only loses the Namespace object."""
        if ns in self._namespaces:
            return
        try:
            await self._req(
                "POST",
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            )
        except KubeError as exc:
            if exc.status != 409:
                log.debug("namespace %s not created: %s", ns, exc)
        self._namespaces.add(ns)


async def run_velero_agent(cfg: FleetConfig, region: str) -> None:
    """Entry point for the region process: `asyncio.create_task(run_velero_agent(cfg, region))`."""
    await VeleroAgent(cfg, region).run()
