"""The dev-stack Velero's restore controller, as Velero's `pkg/controller/restore_controller.go`.

A Restore's Backup is looked up in this cluster (a backup taken elsewhere is there only once backup
sync imported it); a missing one ends the Restore FailedValidation with Velero's wording. Otherwise
the backup's objects are read from its storage location's bucket and written into the cluster.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from drctl.devstack.velero_kube import RESOURCES, KubeError, api_path, now
from drctl.providers.kube_objects import CONFLICT_ATTEMPTS, as_copy

if TYPE_CHECKING:
    from drctl.devstack.velero_agent import VeleroAgent

log = logging.getLogger("drctl.devstack.velero")


class RestoreController:
    """Restores of one cluster, run through the agent's API session."""

    def __init__(self, agent: VeleroAgent) -> None:
        self.agent = agent
        self._namespaces: set[str] = set()

    async def run(self, restore: dict[str, Any]) -> None:
        name = restore["metadata"]["name"]
        spec = restore.get("spec") or {}
        started = now()
        backup_name = spec.get("backupName", "")
        bucket = await self._bucket(name, backup_name)
        if bucket is None:
            return
        await self.agent._set_status("restores", name, {"phase": "InProgress", "startTimestamp": started})
        try:
            objects = await asyncio.to_thread(self.agent.store.download, bucket, backup_name)
        except (ClientError, BotoCoreError) as exc:
            await self.agent._set_status(
                "restores",
                name,
                {
                    "phase": "FailedValidation",
                    "failureReason": f"backup {spec.get('backupName')!r} unreadable: {exc}",
                    "completionTimestamp": now(),
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
                outcome = await self._one(obj, mapping, policy, spec.get("backupName", ""), name)
            except KubeError as exc:
                log.warning(
                    "restore %s: %s/%s failed: %s", name, obj.get("kind"), obj["metadata"].get("name"), exc
                )
                errors += 1
                continue
            restored += outcome == "restored"
            warnings += outcome == "skipped"
        phase = "Completed" if not errors else ("PartiallyFailed" if restored else "Failed")
        await self.agent._set_status(
            "restores",
            name,
            {
                "phase": phase,
                "startTimestamp": started,
                "completionTimestamp": now(),
                "warnings": warnings,
                "errors": errors,
                "progress": {"totalItems": len(objects), "itemsRestored": restored},
            },
        )
        log.info("restore %s %s: %d restored, %d skipped, %d errors", name, phase, restored, warnings, errors)

    async def _bucket(self, restore: str, backup_name: str) -> str | None:
        """The bucket of the restore's backup, found as Velero's restore controller finds it: the Backup
        object in this cluster, then its storage location. None once the restore failed validation."""
        try:
            backup = await self.agent._req(
                "GET", api_path("velero.io", "v1", "backups", self.agent.ns, backup_name)
            )
            location = (backup.get("spec") or {}).get(
                "storageLocation"
            ) or self.agent.cfg.backup.storage_location
            bsl = await self.agent._req(
                "GET", api_path("velero.io", "v1", "backupstoragelocations", self.agent.ns, location)
            )
        except KubeError as exc:
            if exc.status != 404:
                raise
            # Velero's wording (restore_controller.go, fetchBackupInfoInternal).
            why = f"Error retrieving backup: can't find backup {self.agent.ns}/{backup_name}: {exc}"
            await self.agent._set_status(
                "restores",
                restore,
                {"phase": "FailedValidation", "validationErrors": [why], "completionTimestamp": now()},
            )
            return None
        return str(
            ((bsl.get("spec") or {}).get("objectStorage") or {}).get("bucket") or self.agent.cfg.backup.bucket
        )

    async def _one(
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
            await self.agent._req("POST", api_path(group, version, plural, ns), obj)
            return "restored"
        except KubeError as exc:
            if exc.status != 409:
                raise
        if policy != "update":
            return "skipped"  # Velero's default: an existing object is left alone, with a warning
        where = api_path(group, version, plural, ns, meta["name"])
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            # A controller (the node agent writing status) may move the object between the read and
            # the write: a 409 reads it again, as a real client's retry-on-conflict does.
            current = await self.agent._req("GET", where)
            meta["resourceVersion"] = current.get("metadata", {}).get("resourceVersion")
            try:
                await self.agent._req("PUT", where, obj)
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
            await self.agent._req(
                "POST",
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
            )
        except KubeError as exc:
            if exc.status != 409:
                log.debug("namespace %s not created: %s", ns, exc)
        self._namespaces.add(ns)
