"""Backup and restore activities (Velero), run on the region's own task queue.

Sync: the kubernetes client blocks, so these run on the worker's thread pool. They heartbeat the
Backup's phase and item count on every poll, so a stuck Velero shows in the UI.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.defined import activity_methods
from activities.errors import app_error
from activities.per_region import PerRegion
from drctl.config.schema import FleetConfig
from drctl.models.backup import PARTIALLY_FAILED, BackupInfo, BackupName, BackupRequest, RestoreRequest
from drctl.providers.velero import BackupFailed, BackupNotSynced, BackupTimeout, VeleroBackupProvider
from drctl.telemetry import metrics


def _app_error(exc: BaseException, action: str) -> ApplicationError:
    if isinstance(exc, (BackupFailed, BackupTimeout, BackupNotSynced)):
        # The workflow reads the object's last state from the details to report it.
        return ApplicationError(
            str(exc), exc.info.model_dump(mode="json"), type=exc.error.kind, non_retryable=True
        )
    return app_error(exc, action)


def _heartbeat(info: BackupInfo) -> None:
    activity.heartbeat({"phase": info.phase, "items": info.items})


def _completed(info: BackupInfo) -> float:
    # Velero's completionTimestamp; the clock here when the emulation or an old Velero leaves it out.
    try:
        return datetime.fromisoformat((info.completed or "").replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


class BackupActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self._provider = PerRegion(lambda region: VeleroBackupProvider(cfg, region))

    @activity.defn(name="create_backup")
    def create_backup(self, req: BackupRequest) -> BackupInfo:
        """Create a Backup and wait until Velero finishes it; fails unless the policy accepts it."""
        activity.logger.info("backup %s of %s in %s", req.name, req.namespaces, req.region)
        try:
            info = self._provider(req.region).backup(req, on_progress=_heartbeat)
        except (BackupFailed, BackupTimeout) as exc:
            metrics.record_backup(self.cfg.name, req.region, False, None)
            raise _app_error(exc, f"backup {req.name} in {req.region}") from exc
        except Exception as exc:
            raise _app_error(exc, f"backup {req.name} in {req.region}") from exc
        if info.phase == PARTIALLY_FAILED:
            # Accepted by backup.partially_failed_ok, but never passed off as a clean backup.
            activity.logger.warning(
                "backup %s in %s is PartiallyFailed (%d errors, %d warnings), accepted by "
                "backup.partially_failed_ok",
                info.name,
                info.region,
                info.errors,
                info.warnings,
            )
        metrics.record_backup(self.cfg.name, req.region, True, _completed(info))
        return info

    @activity.defn(name="wait_backup_synced")
    def wait_backup_synced(self, req: BackupName) -> BackupInfo:
        """Wait, bounded by backup.sync_timeout_s, until the region's Velero lists the backup: one taken
        in another cluster appears there only after backup sync, and a restore before that fails."""
        activity.logger.info("waiting for %s to sync backup %s", req.region, req.name)
        try:
            return self._provider(req.region).wait_known(req.name, on_progress=_heartbeat)
        except Exception as exc:
            raise _app_error(exc, f"wait for backup {req.name} in {req.region}") from exc

    @activity.defn(name="restore_backup")
    def restore_backup(self, req: RestoreRequest) -> BackupInfo:
        activity.logger.info("restore %s from backup %s in %s", req.name, req.backup_name, req.region)
        try:
            return self._provider(req.region).restore(req, on_progress=_heartbeat)
        except Exception as exc:
            raise _app_error(exc, f"restore {req.name} in {req.region}") from exc


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(BackupActivities(cfg))
