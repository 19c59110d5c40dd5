"""The drill's report activities: store a drill's report in S3 (drctl/providers/drill_reports.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.config import Config as BotoConfig
from temporalio import activity

from activities.defined import activity_methods
from activities.errors import app_error
from drctl.config.schema import FleetConfig
from drctl.models.drill import DrillReport, ReportKey
from drctl.providers.drill_reports import ReportStore as ReportStore
from drctl.telemetry import metrics

# One try per call, each bounded: the drill's activity retry policy retries for minutes with backoff,
# and botocore's own retries would hide the S3 error (and the time spent) inside one attempt.
_S3_CONFIG = BotoConfig(
    retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=5, read_timeout=15
)


class ReportActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self._store: ReportStore | None = None

    @property
    def store(self) -> ReportStore:
        if self._store is None:
            self._store = ReportStore(self.cfg, _S3_CONFIG)
        return self._store

    @activity.defn(name="drill_store_report")
    def store_report(self, report: DrillReport) -> ReportKey:
        try:
            key = ReportKey(id=self.store.put(report))
        except Exception as exc:  # noqa: BLE001 - mapped through the one error table
            raise app_error(exc, f"store drill report in s3://{self.store.bucket}") from exc
        # Recorded once the report is stored: the drill's one durable end, reached once per drill.
        metrics.record_drill(
            report.fleet, report.verdict.value, report.measured_rto_s, report.finished_at.timestamp()
        )
        return key


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(ReportActivities(cfg))
