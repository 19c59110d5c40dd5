"""The cluster-state RPO counts only backups this region's own schedules took into this cluster's
own storage location: a newer backup in another location (another cluster's bucket that Velero
lists, or a second location of this one) or imported from another region is not this region's."""

from __future__ import annotations

from drctl.config.schema import FleetConfig
from drctl.models.backup import BackupInfo
from drctl.providers.velero_schedule import VeleroSchedules
from tests.support.config import fleet_config_data

REGION = "us-west-1"


def _backup(name: str, completed: str, **kw: str) -> BackupInfo:
    own = {"schedule_name": "daily", "origin_region": REGION, "storage_location": "default"}
    return BackupInfo(name=name, region=REGION, phase="Completed", completed=completed, **(own | kw))


def test_the_last_backup_is_the_regions_own_in_its_own_storage_location() -> None:
    cfg = FleetConfig.model_validate(fleet_config_data())
    assert cfg.backup.storage_location == "default"
    schedules = VeleroSchedules(cfg, REGION)
    backups = [
        _backup("daily-1", "2026-12-03T08:00:00Z"),
        _backup("daily-2", "2026-12-03T09:00:00Z", storage_location="east-bucket"),
        _backup("daily-3", "2026-12-03T09:30:00Z", origin_region="us-east-1"),
        _backup("manual", "2026-12-03T09:45:00Z"),
    ]
    backups[3].schedule_name = None  # taken by hand, not by a schedule
    schedules.velero.list_backups = lambda: backups  # type: ignore[method-assign]
    last = schedules.last_successful()
    assert last.name == "daily-1", last
