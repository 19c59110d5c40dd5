"""Models of Velero backups and restores: provider, activity and workflow I/O.

Workflows import these through `imports_passed_through`, so this module stays free of I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel, Field

BACKUP_OK = "Completed"
BACKUP_FAILED_PHASES = ("Failed", "FailedValidation")
PARTIALLY_FAILED = "PartiallyFailed"
TERMINAL_PHASES = (BACKUP_OK, PARTIALLY_FAILED, *BACKUP_FAILED_PHASES)
# Labels Velero puts on Backups: a Schedule's name on each backup it takes, and the storage location's
# name on each backup it takes or imports through backup sync (which keeps every other label).
SCHEDULE_LABEL = "velero.io/schedule-name"
STORAGE_LOCATION_LABEL = "velero.io/storage-location"
# drctl's own: the region whose cluster took the backup. Velero copies a Schedule's labels onto its
# Backups and sync keeps them, so it still says where a backup came from once a shared bucket has
# imported it into every cluster.
REGION_LABEL = "drctl.io/region"


class BackupRequest(BaseModel):
    region: str = Field(description="Region whose cluster runs the backup.")
    name: str = Field(description="Backup object name (unique in the Velero namespace).")
    namespaces: list[str] = Field(description="spec.includedNamespaces.")
    label_selector: dict[str, str] = Field(
        default_factory=dict, description="spec.labelSelector.matchLabels."
    )
    ttl: str | None = Field(None, description="spec.ttl; default backup.ttl.")


class BackupInfo(BaseModel):
    """A Backup or Restore object as Velero reports it."""

    kind: Literal["Backup", "Restore"] = "Backup"
    name: str
    region: str
    phase: str = Field("", description="status.phase; empty until the controller picks it up.")
    backup_name: str | None = Field(None, description="Restores: spec.backupName.")
    namespaces: list[str] = Field(default_factory=list)
    items: int = Field(0, description="Items backed up or restored (status.progress).")
    errors: int = 0
    warnings: int = 0
    failure_reason: str | None = None
    started: str | None = None
    completed: str | None = None
    expiration: str | None = None
    storage_location: str | None = Field(None, description="spec.storageLocation.")
    schedule_name: str | None = Field(None, description=f"Backups: the {SCHEDULE_LABEL} label.")
    origin_region: str | None = Field(
        None, description=f"Backups: the {REGION_LABEL} label, the region whose cluster took it."
    )


class RestoreRequest(BaseModel):
    region: str = Field(description="Region whose cluster runs the restore (the target).")
    name: str
    backup_name: str
    namespace_mapping: dict[str, str] = Field(default_factory=dict, description="spec.namespaceMapping.")
    existing_resource_policy: Literal["none", "update"] = Field(
        "update", description="spec.existingResourcePolicy: leave or update objects that already exist."
    )


def restore_scope(mapping: Mapping[str, str], allowed: Iterable[str]) -> list[str]:
    """The backup's namespaces a Restore includes (spec.includedNamespaces).

    Velero restores every namespace of the backup when the list is empty, and an unmapped one under its
    own name, so the list is never empty: each namespace the mapping maps (its target was checked
    against the allow-list) and each allowed namespace it does not map away, restored in place.
    """
    return sorted(set(mapping) | {ns for ns in allowed if ns not in mapping})


# --- The Backup and Restore workflows (`drctl backup create`, `drctl restore`) ---------------------


class BackupJob(BaseModel):
    fleet: str
    queue: str = Field(description="Task queue of the region whose cluster runs the backup.")
    request: BackupRequest


class RestoreJob(BaseModel):
    fleet: str
    queue: str = Field(description="Task queue of the region whose cluster runs the restore.")
    request: RestoreRequest


class BackupJobResult(BaseModel):
    kind: Literal["Backup", "Restore"]
    name: str
    region: str
    ok: bool = Field(description="True when the object reached a phase the policy accepts.")
    reason: str
    info: BackupInfo | None = Field(None, description="The object as Velero last reported it.")


class ScheduleInfo(BaseModel):
    """A Velero Schedule object of one region's cluster."""

    name: str
    region: str
    schedule: str
    ttl: str | None = None
    namespaces: list[str] = []
    phase: str = ""
    last_backup: str | None = None


class LastBackup(BaseModel):
    """The newest Completed backup of a region and its age (the cluster-state side of the RPO)."""

    region: str
    name: str | None = None
    completed: str | None = None
    age_s: float | None = None
    error: str | None = None


class BackupList(BaseModel):
    """The Backups one region's Velero knows, newest first."""

    items: list[BackupInfo] = []


class BackupName(BaseModel):
    region: str
    name: str


class ScheduleList(BaseModel):
    items: list[ScheduleInfo] = []
