"""Builders for the model objects many tests start from: one place for the fields a test does not
care about, so a test names only what it is about."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from drctl.models import notify
from drctl.models.drill import DrillReport, Verdict
from drctl.models.health import ProbeStatus, RegionProbe, TargetProbe
from drctl.models.monitor import RegionTracker
from drctl.models.rpo import LagReport, ReplicationRun, TransferStats
from drctl.models.watch import WatchInput


def drill_report(at: datetime | None = None, **fields: Any) -> DrillReport:
    """A passed drill report started and finished at `at` (now by default); `fields` override."""
    at = at or datetime.now(UTC)
    base: dict[str, Any] = {
        "id": "drill/t/1",
        "fleet": "t",
        "experiment": "x",
        "title": "x",
        "target_region": "w",
        "verdict": Verdict.PASS,
        "started_at": at,
        "finished_at": at,
        "expect_failover": True,
        "rto_target_s": 30,
    }
    return DrillReport(**{**base, **fields})


FAILOVER_ENDED = {
    "status": "succeeded",
    "source": "us-west-1",
    "target": "us-east-1",
    "error": None,
    "rto_s": None,
    "rto_target_s": 30,
    "rto_met": None,
}


def failover_ended_event(fleet: str, workflow_id: str, at: datetime, **fields: Any) -> notify.Event:
    """`notify.failover_ended` for a us-west-1 → us-east-1 failover that succeeded, RTO unmeasured;
    `fields` override."""
    return notify.failover_ended(fleet, workflow_id, at, **{**FAILOVER_ENDED, **fields})


def lag_report(at: datetime, lag_s: float | None, bucket: str = "m", **fields: Any) -> LagReport:
    """Replication lag of `bucket` from region w to region e, measured at `at`; `fields` override."""
    return LagReport(
        bucket=bucket, source_region="w", replica_region="e", measured_at=at, lag_s=lag_s, **fields
    )


def replication_run(at: datetime, lag: LagReport, bucket: str = "m") -> ReplicationRun:
    """A successful, checked copy of `bucket` from w to e that finished at `at` and measured `lag`."""
    return ReplicationRun(
        bucket=bucket, source_region="w", replica_region="e", mode="copy", started_at=at, finished_at=at,
        ok=True, stats=TransferStats(), check_ok=True, lag=lag,
    )  # fmt: skip


def region_probe(
    status: ProbeStatus,
    gateway: ProbeStatus | None = None,
    *,
    region: str = "e",
    reason: str = "why",
    **fields: Any,
) -> RegionProbe:
    """A probe of `region` that found it `status`, its gateway `gateway` (default: the same status)."""
    gw = TargetProbe(target="gateway", url="http://g", status=gateway or status)
    return RegionProbe(region=region, status=status, reason=reason, gateway=gw, **fields)


def watch_input(**fields: Any) -> WatchInput:
    """A watcher call on region "a" with the monitor's usual probe settings; `fields` override them."""
    base: dict[str, Any] = dict(
        regions=["a"],
        trackers={"a": RegionTracker(region="a")},
        interval_s=10.0,
        fast_confirm=True,
        fast_confirm_interval_s=1.0,
        failure_threshold=3,
        recovery_threshold=2,
        fail_on_degraded=True,
        probe_timeout_s=2.0,
        return_after_s=600.0,
    )
    return WatchInput.model_validate({**base, **fields})
