"""Replication and RPO models, and the pure lag arithmetic shared by activities, CLI and bench.

Lag (the replication RPO) is the age of the oldest object in the source that a replica lacks or
holds a different version of; 0 when the replica is in sync.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from drctl.config.schema import FleetConfig
from drctl.models.release import ParityReport


class ReplicaPair(BaseModel):
    """One source bucket → one replica bucket, as the Replicate workflow schedules it."""

    bucket: str = Field(description="The data.buckets[] name.")
    source_region: str
    source_bucket: str
    replica_region: str
    replica_bucket: str
    mode: Literal["copy", "sync"] = "copy"
    interval_s: float = 30.0

    @property
    def key(self) -> str:
        return f"{self.bucket}/{self.replica_region}"


def replica_pairs(cfg: FleetConfig) -> list[ReplicaPair]:
    return [
        ReplicaPair(
            bucket=b.name,
            source_region=b.source.region,
            source_bucket=b.source.bucket,
            replica_region=r.region,
            replica_bucket=r.bucket,
            mode=b.mode,
            interval_s=b.interval_s,
        )
        for b in cfg.data.buckets
        for r in b.replicas
    ]


class TransferStats(BaseModel):
    transfers: int = 0
    bytes: int = 0
    checks: int = 0
    deletes: int = 0
    errors: int = 0
    elapsed_s: float = 0.0


class SourceObject(BaseModel):
    path: str
    size: int
    mod_time: datetime


class LagReport(BaseModel):
    """One replica measured against its source."""

    bucket: str
    source_region: str
    replica_region: str
    measured_at: datetime
    lag_s: float | None = Field(None, description="None when it could not be measured (see error).")
    missing: int = Field(0, description="Source objects absent from the replica.")
    differ: int = Field(0, description="Source objects whose replica copy differs (size or hash).")
    source_objects: int = 0
    oldest_unreplicated: str | None = Field(None, description="Path of the object that sets the lag.")
    error: str | None = None
    estimated_from: datetime | None = Field(
        None,
        description="Source unreachable: an upper bound from the last replication check at this time "
        "(its lag plus the time since, as anything written after it may be lost).",
    )

    @property
    def unreplicated(self) -> int:
        return self.missing + self.differ


def estimate_from_last_run(pair: ReplicaPair, last: ReplicationRun, now: datetime, why: str) -> LagReport:
    """A replica's lag when its source cannot be read: at most the lag the last check found plus the
    time since that check, since every object written after it may be missing."""
    since = max(0.0, (now - last.lag.measured_at).total_seconds())
    return LagReport(
        bucket=pair.bucket,
        source_region=pair.source_region,
        replica_region=pair.replica_region,
        measured_at=now,
        lag_s=round((last.lag.lag_s or 0.0) + since, 3),
        missing=last.lag.missing,
        differ=last.lag.differ,
        source_objects=last.lag.source_objects,
        oldest_unreplicated=last.lag.oldest_unreplicated,
        estimated_from=last.lag.measured_at,
        error=None if last.lag.lag_s is not None else why,
    )


def compute_lag(
    objects: list[SourceObject], missing: set[str], differ: set[str], now: datetime
) -> tuple[float, str | None]:
    """(lag in seconds, path of the oldest unreplicated object); (0, None) when in sync."""
    behind = [o for o in objects if o.path in missing or o.path in differ]
    if not behind:
        return 0.0, None
    oldest = min(behind, key=lambda o: o.mod_time)
    return max(0.0, round((now - oldest.mod_time).total_seconds(), 3)), oldest.path


class ReplicationRun(BaseModel):
    """One `rclone copy|sync` of a pair, its `rclone check` and the lag measured after it."""

    bucket: str
    source_region: str
    replica_region: str
    mode: Literal["copy", "sync"]
    started_at: datetime
    finished_at: datetime
    ok: bool
    stats: TransferStats
    check_ok: bool = Field(description="rclone check found the replica identical to the source.")
    lag: LagReport
    error: str | None = None


class RpoCheckInput(BaseModel):
    target: str = Field(description="The failover target; every replica held there is measured.")
    sources: list[str] = Field(
        default_factory=list, description="Regions whose release the target must match."
    )
    parity: bool = Field(
        True, description="Compare releases too (emergency mode skips it: the source is failing)."
    )
    timeout_s: float = Field(
        20.0, description="Bound on the whole check: release reads, lag measurement, fallback query."
    )


class RpoCheck(BaseModel):
    """The failover preflight's RPO verdict for one target region, and its release parity."""

    target: str
    rpo_target_s: float
    reports: list[LagReport] = Field(default_factory=list)
    parity: list[ParityReport] = Field(default_factory=list)
    lag_s: float | None = Field(
        None, description="Worst lag over the target's replicas; None if unmeasurable."
    )
    objects_behind: int = 0
    errors: list[str] = Field(default_factory=list)

    def lag_at(self, fault_at: datetime | None) -> float | None:
        """The worst lag as it stood at `fault_at`: objects written after the fault cannot be lost to it,
        and a lag measured later has grown by the time since (its oldest object only got older)."""
        if self.lag_s is None or fault_at is None:
            return self.lag_s
        at = [
            max(0.0, (r.lag_s or 0.0) - max(0.0, (r.measured_at - fault_at).total_seconds()))
            for r in self.reports
        ]
        return round(max(at, default=0.0), 3)

    @property
    def exceeded(self) -> bool:
        return bool(self.errors) or (self.lag_s is not None and self.lag_s > self.rpo_target_s)

    def describe(self) -> str:
        if self.errors:
            return f"replication lag of {self.target} unknown: {'; '.join(self.errors)}"
        worst = max(self.reports, key=lambda r: r.lag_s or 0.0, default=None)
        where = (
            f" ({worst.bucket}: {worst.oldest_unreplicated})" if worst and worst.oldest_unreplicated else ""
        )
        est = (
            " (estimated from the last replication run: source unreachable)"
            if any(r.estimated_from for r in self.reports)
            else ""
        )
        return (
            f"replication lag of {self.target} is {self.lag_s or 0:.1f} s > RPO {self.rpo_target_s:g} s, "
            f"{self.objects_behind} object(s) not replicated{where}{est}"
        )


class DataLossExposure(BaseModel):
    """What a failover accepted to lose: recorded in the result and the UI."""

    lag_s: float | None = Field(
        description="Replication lag at the fault (measured lag less the time since the fault)."
    )
    measured_lag_s: float | None = Field(
        None, description="Lag as the preflight measured it, after the fault."
    )
    objects: int
    rpo_target_s: float
    forced: bool = Field(description="A normal failover with --force; False for emergency mode.")
    detail: str


class ArtifactsInput(BaseModel):
    source: str
    target: str


class ArtifactsResult(BaseModel):
    """A migration's artifact copy: one rclone run per bucket whose source is the migration's source."""

    runs: list[ReplicationRun] = Field(default_factory=list)
    skipped: list[str] = Field(
        default_factory=list, description="Buckets with no replica in the target region."
    )

    @property
    def verified(self) -> bool:
        return all(r.ok and r.check_ok for r in self.runs)


# --- the Replicate workflow ---------------------------------------------------------------------


class ReplicateInput(BaseModel):
    fleet: str
    task_queue: str = Field(description="Fallback queue for a replica region without its own.")
    queues: dict[str, str] = Field(
        default_factory=dict, description="Task queue per region: runs go to the replica's."
    )
    pairs: list[ReplicaPair]
    rpo_target_s: float
    timeout_s: float = 300.0
    max_runs: int = Field(200, description="Continue as new after this many runs.")
    state: ReplicateState | None = None


class PairState(BaseModel):
    pair: ReplicaPair
    next_run_at: datetime | None = None
    runs: int = 0
    failures: int = 0
    last: ReplicationRun | None = None
    last_verified: ReplicationRun | None = Field(
        None,
        description="The last run whose check measured the lag: what a failover falls back on when the "
        "source is unreachable.",
    )


class ReplicateState(BaseModel):
    pairs: dict[str, PairState]
    runs: int = 0
    total_runs: int = 0
    total_bytes: int = 0
    total_transfers: int = 0
    stopping: bool = False


class ReplicateStatus(BaseModel):
    fleet: str
    rpo_target_s: float
    total_runs: int
    total_transfers: int
    total_bytes: int
    pairs: list[PairState]


ReplicateInput.model_rebuild()
