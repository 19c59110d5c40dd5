"""The dev-stack Velero's backup-sync controller: imports backups other clusters wrote to the bucket.

As Velero's `pkg/controller/backup_sync_controller.go`: every `--backup-sync-period` (here
`devstack.velero_backup_sync_s`) each storage location's bucket is listed, and each backup there that
the cluster has no Backup object for is created from its `velero-backup.json`, with
`spec.storageLocation` and the `velero.io/storage-location` label set to this cluster's location
name; every other label (a Schedule's name, drctl's region) is kept. Until that happens a Restore of
such a backup fails validation, so this is what makes a migration wait for the target cluster.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from drctl.devstack.velero_kube import KubeError
from drctl.devstack.velero_store import BackupStore
from drctl.models.backup import STORAGE_LOCATION_LABEL

log = logging.getLogger("drctl.devstack.velero")

# What the source cluster allocated or owns does not travel (upstream clears resourceVersion and
# drops owner references to objects this cluster does not have).
_DROPPED_META = (
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "ownerReferences",
)


class _Api(Protocol):
    ns: str

    async def _req(self, method: str, path: str, body: Any = None, params: dict | None = None) -> Any: ...


async def sync_backups(api: _Api, store: BackupStore, default_bucket: str) -> list[str]:
    """One sync pass; returns the names of the backups it imported."""
    base = f"/apis/velero.io/v1/namespaces/{api.ns}"
    locations = ((await api._req("GET", f"{base}/backupstoragelocations")) or {}).get("items", [])
    known = {
        b["metadata"]["name"] for b in ((await api._req("GET", f"{base}/backups")) or {}).get("items", [])
    }
    imported: list[str] = []
    for loc in locations:
        location = loc["metadata"]["name"]
        bucket = ((loc.get("spec") or {}).get("objectStorage") or {}).get("bucket") or default_bucket
        try:
            names = await asyncio.to_thread(store.list_backups, bucket)
        except (ClientError, BotoCoreError) as exc:
            # Upstream logs and skips the location until the next period.
            log.warning("backup sync: cannot list %s (location %s): %s", bucket, location, exc)
            continue
        for name in sorted(set(names) - known):
            try:
                backup = await asyncio.to_thread(store.metadata, bucket, name)
            except (ClientError, BotoCoreError):
                continue  # the tarball is written before the metadata: not finished yet
            meta = {k: v for k, v in (backup.get("metadata") or {}).items() if k not in _DROPPED_META}
            meta["namespace"] = api.ns
            meta["labels"] = {**(meta.get("labels") or {}), STORAGE_LOCATION_LABEL: location}
            backup["metadata"] = meta
            backup["spec"] = {**(backup.get("spec") or {}), "storageLocation": location}
            try:
                await api._req("POST", f"{base}/backups", backup)
            except KubeError as exc:
                if exc.status != 409:  # 409: created meanwhile (a Backup of the same name)
                    raise
            known.add(name)
            imported.append(name)
    if imported:
        log.info("backup sync imported %d backup(s): %s", len(imported), ", ".join(imported))
    return imported
