"""Read-only activities behind the CLI's reads (the FleetRead workflow): Velero backups and
schedules, release parity and the last backup of a region (on that region's queue), drill history
and replication lag (on the main queue).

Sync: the kubernetes client, boto3 and rclone block, so these run on the worker's thread pool.
Each provider is built on first use, so a worker starts while a cluster or S3 is down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.defined import activity_methods
from activities.errors import app_error
from activities.per_region import PerRegion
from drctl.config.schema import FleetConfig
from drctl.models.activity_io import RegionRequest
from drctl.models.backup import BackupInfo, BackupList, BackupName, LastBackup, ScheduleInfo, ScheduleList
from drctl.models.reads import (
    DrillHistory,
    DrillHistoryRequest,
    DrillReportRequest,
    DrillReportText,
    LagList,
    ScheduleWrite,
)
from drctl.models.release import Release
from drctl.models.rpo import replica_pairs
from drctl.providers.drill_reports import ReportStore
from drctl.providers.rclone import Rclone
from drctl.providers.release import ReleaseReader
from drctl.providers.velero import VeleroBackupProvider
from drctl.providers.velero_schedule import VeleroSchedules

T = TypeVar("T")

# A status read must answer within the CLI's patience: rclone's lag check gets at most this.
LAG_TIMEOUT_S = 30.0


def _mapped(action: str, read: Callable[[], T]) -> T:
    """`read()`, its failure mapped through the one error table as `action` failing."""
    try:
        return read()
    except Exception as exc:
        raise app_error(exc, action) from exc


class ReadActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self._velero = PerRegion(lambda region: VeleroBackupProvider(cfg, region))
        self._schedules = PerRegion(lambda region: VeleroSchedules(cfg, region))
        self._store: ReportStore | None = None

    @property
    def store(self) -> ReportStore:
        if self._store is None:
            self._store = ReportStore(self.cfg)
        return self._store

    @activity.defn(name="list_backups")
    def list_backups(self, inp: RegionRequest) -> BackupList:
        return _mapped(
            f"list backups in {inp.region}", lambda: BackupList(items=self._velero(inp.region).list_backups())
        )

    @activity.defn(name="describe_backup")
    def describe_backup(self, inp: BackupName) -> BackupInfo:
        return _mapped(
            f"read backup {inp.name} in {inp.region}",
            lambda: self._velero(inp.region).describe_backup(inp.name),
        )

    @activity.defn(name="list_schedules")
    def list_schedules(self, inp: RegionRequest) -> ScheduleList:
        return _mapped(
            f"list schedules in {inp.region}", lambda: ScheduleList(items=self._schedules(inp.region).list())
        )

    @activity.defn(name="last_backup")
    def last_backup(self, inp: RegionRequest) -> LastBackup:
        return self._schedules(inp.region).last_successful()  # never raises: the error is in the answer

    @activity.defn(name="read_release")
    def read_release(self, inp: RegionRequest) -> Release:
        return ReleaseReader(self.cfg).read(inp.region)  # never raises: the error is in the answer

    @activity.defn(name="measure_lags")
    async def measure_lags(self) -> LagList:
        """Lag of every replica, measured now with rclone: what `drctl status` shows."""
        rc = Rclone(self.cfg, timeout_s=min(self.cfg.data.check_timeout_s, LAG_TIMEOUT_S))
        pairs = replica_pairs(self.cfg)
        return LagList(
            reports=list(await asyncio.gather(*(asyncio.to_thread(rc.measure_lag, p) for p in pairs)))
        )

    @activity.defn(name="drill_history")
    def drill_history(self, inp: DrillHistoryRequest) -> DrillHistory:
        where = f"list drill reports in s3://{self.cfg.drills.history_bucket}"
        return _mapped(where, lambda: DrillHistory(reports=self.store.list(inp.fleet, inp.limit)))

    # The one write beside the reads: a Velero Schedule is declarative configuration of the region's
    # cluster (like `kubectl apply`), written by the region's own worker so the CLI needs only Temporal.
    @activity.defn(name="create_schedule")
    def create_schedule(self, inp: ScheduleWrite) -> ScheduleInfo:
        ns = self.cfg.region(inp.region).kube.namespace
        return _mapped(
            f"create schedule {inp.name} in {inp.region}",
            lambda: self._schedules(inp.region).create(inp.name, inp.schedule, inp.ttl, [ns], inp.labels),
        )

    @activity.defn(name="delete_schedule")
    def delete_schedule(self, inp: ScheduleWrite) -> ScheduleWrite:
        _mapped(
            f"delete schedule {inp.name} in {inp.region}",
            lambda: self._schedules(inp.region).delete(inp.name),
        )
        return inp

    @activity.defn(name="drill_report")
    def drill_report(self, inp: DrillReportRequest) -> DrillReportText:
        try:
            return DrillReportText(
                report=self.store.get(inp.drill_id), markdown=self.store.get_markdown(inp.drill_id)
            )
        except ValueError as exc:  # not a drill id: the store refuses to make a key of it
            raise ApplicationError(str(exc), type="Invalid", non_retryable=True) from exc
        except Exception as exc:
            raise app_error(exc, f"read the report of {inp.drill_id} from s3://{self.store.bucket}") from exc


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(ReadActivities(cfg))
