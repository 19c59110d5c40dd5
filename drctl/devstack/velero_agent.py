"""The dev stack's Velero: completes Backup and Restore objects for real, against moto S3.

It runs inside each region process and talks to that region's emulated cluster over the
Kubernetes API, like the real Velero server does. Backups land in the shared bucket in Velero's
object layout (`drctl.devstack.velero_store`). As in Velero, a Restore looks its Backup up in its own
cluster and fails validation when it is not there: a backup taken in another region's cluster becomes
restorable only once this cluster's backup sync (`drctl.devstack.velero_sync`, every
`devstack.velero_backup_sync_s`) has imported it.

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
import time
from datetime import UTC, datetime
from typing import Any

import aiohttp
from botocore.exceptions import BotoCoreError, ClientError

from drctl.config.schema import DevStackConfig, FleetConfig
from drctl.devstack.velero_kube import RESOURCES, KubeError, api_path, now
from drctl.devstack.velero_restore import RestoreController
from drctl.devstack.velero_schedules import reconcile_schedules
from drctl.devstack.velero_store import BackupStore, go_duration
from drctl.devstack.velero_sync import sync_backups
from drctl.models.backup import STORAGE_LOCATION_LABEL

log = logging.getLogger("drctl.devstack.velero")

FAULTS_CONFIGMAP = "drctl-devstack-velero-faults"


def _matches(obj: dict[str, Any], selector: dict[str, Any] | None) -> bool:
    want = (selector or {}).get("matchLabels") or {}
    labels = obj.get("metadata", {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in want.items())


class VeleroAgent:
    def __init__(
        self, cfg: FleetConfig, region: str, poll_s: float = 0.2, backup_sync_s: float | None = None
    ) -> None:
        self.cfg = cfg
        self.region = region
        self.poll_s = poll_s
        self.backup_sync_s = backup_sync_s or (cfg.devstack or DevStackConfig()).velero_backup_sync_s
        self._synced_at = float("-inf")  # as Velero: a first sync at start, then every period
        self.api_url = (cfg.region(region).kube.api_url or "").rstrip("/")
        self.ns = cfg.backup.namespace
        self.store = BackupStore(cfg)
        self._session: aiohttp.ClientSession | None = None
        self.restores = RestoreController(self)

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
        await self._req("PATCH", api_path("velero.io", "v1", plural, self.ns, name), {"status": status})

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
        if time.monotonic() - self._synced_at >= self.backup_sync_s:
            self._synced_at = time.monotonic()
            try:
                await sync_backups(self, self.store, self.cfg.backup.bucket)
            except KubeError as exc:
                if exc.status != 404:
                    raise
        for plural, handler in (("backups", self._do_backup), ("restores", self.restores.run)):
            try:
                listing = await self._req("GET", api_path("velero.io", "v1", plural, self.ns))
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
        started = now()
        location = spec.get("storageLocation") or self.cfg.backup.storage_location
        try:
            bsl = await self._req(
                "GET", api_path("velero.io", "v1", "backupstoragelocations", self.ns, location)
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
        # As Velero's backup controller: the location's name as a label, kept in the bucket's copy.
        labels = {**(backup["metadata"].get("labels") or {}), STORAGE_LOCATION_LABEL: location}
        backup["metadata"]["labels"] = labels
        await self._req(
            "PATCH", api_path("velero.io", "v1", "backups", self.ns, name), {"metadata": {"labels": labels}}
        )
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
                "completionTimestamp": now(),
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
                {"phase": "Failed", "failureReason": f"object store: {exc}", "completionTimestamp": now()},
            )
            return
        await self._set_status("backups", name, status)
        log.info("backup %s completed: %d items", name, len(items))

    async def _fault(self, key: str) -> str | None:
        """The injected fault for `key` from the dev-stack faults ConfigMap, if any."""
        try:
            cm = await self._req("GET", api_path("", "v1", "configmaps", self.ns, FAULTS_CONFIGMAP))
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
                    listing = await self._req("GET", api_path(group, version, plural, ns), params=params)
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


async def run_velero_agent(cfg: FleetConfig, region: str) -> None:
    """Entry point for the region process: `asyncio.create_task(run_velero_agent(cfg, region))`."""
    await VeleroAgent(cfg, region).run()
