"""Velero `Schedule` objects (velero.io/v1) and the age of the last successful backup per region.

A Schedule makes the region's Velero take a Backup on a cron or `@every <duration>` schedule; its
Backups carry the label `velero.io/schedule-name`, and their age is what cluster-state RPO is.

With a shared bucket, backup sync imports every region's backups into every cluster, under the same
storage location name and with their labels kept. So the RPO counts a backup only when it carries
this region's `drctl.io/region` label (Velero copies a Schedule's labels onto its Backups), a
schedule's name, and this cluster's storage location: another region's fresh backup never hides a
broken schedule here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from kubernetes.client.exceptions import ApiException

from drctl.config.schema import FleetConfig
from drctl.models.backup import REGION_LABEL, BackupInfo, LastBackup, ScheduleInfo
from drctl.providers.errors import ErrorClass, ProviderError, classify
from drctl.providers.kube_objects import STRICT
from drctl.providers.kubernetes import REQUEST_TIMEOUT
from drctl.providers.velero import GROUP, VERSION, VeleroBackupProvider


def _info(obj: dict[str, Any], region: str) -> ScheduleInfo:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    tmpl = spec.get("template") or {}
    return ScheduleInfo(
        name=obj["metadata"]["name"],
        region=region,
        schedule=spec.get("schedule", ""),
        ttl=tmpl.get("ttl"),
        namespaces=tmpl.get("includedNamespaces") or [],
        phase=status.get("phase", ""),
        last_backup=status.get("lastBackup"),
    )


class VeleroSchedules:
    def __init__(self, cfg: FleetConfig, region: str) -> None:
        self.cfg = cfg
        self.region = region
        self.velero = VeleroBackupProvider(cfg, region)
        self.api = self.velero.api
        self.ns = cfg.backup.namespace

    def create(
        self, name: str, schedule: str, ttl: str, namespaces: list[str], labels: dict[str, str]
    ) -> ScheduleInfo:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "Schedule",
            "metadata": {
                "name": name,
                "namespace": self.ns,
                # Copied by Velero onto each Backup the schedule takes (FromSchedule).
                "labels": {"app.kubernetes.io/managed-by": "drctl", REGION_LABEL: self.region},
            },
            "spec": {
                "schedule": schedule,
                "useOwnerReferencesInBackup": False,
                "template": {
                    "includedNamespaces": namespaces,
                    "ttl": ttl,
                    "storageLocation": self.cfg.backup.storage_location,
                    "labelSelector": {"matchLabels": labels},
                },
            },
        }
        try:
            obj = self.api.create_namespaced_custom_object(
                GROUP,
                VERSION,
                self.ns,
                "schedules",
                body,
                field_validation=STRICT,
                _request_timeout=REQUEST_TIMEOUT,
            )
        except ApiException as exc:
            if exc.status == 409:
                raise ProviderError(
                    ErrorClass(
                        kind="Conflict",
                        retryable=False,
                        message=f"schedule {name!r} already exists in {self.region}",
                    )
                ) from exc
            raise ProviderError(classify(exc, f"create schedules/{name} in {self.region}")) from exc
        return _info(cast(dict[str, Any], obj), self.region)

    def list(self) -> list[ScheduleInfo]:
        try:
            out = cast(
                dict[str, Any], self.api.list_namespaced_custom_object(GROUP, VERSION, self.ns, "schedules")
            )
        except ApiException as exc:
            raise ProviderError(classify(exc, f"list schedules in {self.region}")) from exc
        return sorted((_info(o, self.region) for o in out.get("items", [])), key=lambda s: s.name)

    def delete(self, name: str) -> None:
        try:
            self.api.delete_namespaced_custom_object(GROUP, VERSION, self.ns, "schedules", name)
        except ApiException as exc:
            raise ProviderError(classify(exc, f"delete schedules/{name} in {self.region}")) from exc

    def _own(self, b: BackupInfo) -> bool:
        """Taken by this region's schedules into this cluster's storage location (not imported)."""
        return (
            b.schedule_name is not None
            and b.origin_region == self.region
            and (b.storage_location or self.cfg.backup.storage_location) == self.cfg.backup.storage_location
        )

    def last_successful(self) -> LastBackup:
        """The newest Completed scheduled backup of the region itself and its age; never raises."""
        try:
            done = [
                b
                for b in self.velero.list_backups()
                if b.phase == "Completed" and b.completed and self._own(b)
            ]
        except ProviderError as exc:
            return LastBackup(region=self.region, error=str(exc))
        if not done:
            return LastBackup(region=self.region)
        newest = max(done, key=lambda b: b.completed or "")
        when = datetime.fromisoformat((newest.completed or "").replace("Z", "+00:00"))
        return LastBackup(
            region=self.region,
            name=newest.name,
            completed=newest.completed,
            age_s=round((datetime.now(UTC) - when).total_seconds(), 1),
        )
