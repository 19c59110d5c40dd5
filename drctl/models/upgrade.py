"""Models of backups, restores, upgrades and migrations: workflow and activity I/O.

Workflows import these through `imports_passed_through`, so this module stays free of I/O.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from drctl.config import FleetConfig
from drctl.models.ops import FleetSpec

# --- Backup and restore (Velero) ----------------------------------------------------------------

BACKUP_OK = "Completed"
BACKUP_FAILED_PHASES = ("Failed", "FailedValidation")
PARTIALLY_FAILED = "PartiallyFailed"
TERMINAL_PHASES = (BACKUP_OK, PARTIALLY_FAILED, *BACKUP_FAILED_PHASES)


class BackupRequest(BaseModel):
    region: str = Field(description="Region whose cluster runs the backup.")
    name: str = Field(description="Backup object name (unique in the Velero namespace).")
    namespaces: list[str] = Field(description="spec.includedNamespaces.")
    label_selector: dict[str, str] = Field(default_factory=dict, description="spec.labelSelector.matchLabels.")
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
    storage_location: str | None = None


class RestoreRequest(BaseModel):
    region: str = Field(description="Region whose cluster runs the restore (the target).")
    name: str
    backup_name: str
    namespace_mapping: dict[str, str] = Field(default_factory=dict, description="spec.namespaceMapping.")
    existing_resource_policy: Literal["none", "update"] = Field(
        "update", description="spec.existingResourcePolicy: leave or update objects that already exist."
    )


# --- Analysis -----------------------------------------------------------------------------------


class Verdict(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"


class TrackSample(BaseModel):
    """What one track did during one analysis window."""

    track: str = Field(description="region/track, as the analysis names it.")
    requests: int = 0
    errors: int = 0
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


class AnalysisLimits(BaseModel):
    max_error_rate: float
    max_ttft_p50_ratio: float
    max_ttft_p99_ratio: float
    min_samples: int


class TrackRef(BaseModel):
    region: str
    track: str

    def __str__(self) -> str:
        return f"{self.region}/{self.track}"


class AnalysisRequest(BaseModel):
    candidate: TrackRef = Field(description="What is under test: a canary or green track, or a migration target.")
    baseline: TrackRef = Field(description="What it is compared with, measured in the same window.")
    window_s: float = Field(description="Analysis window, seconds.")
    limits: AnalysisLimits


class AnalysisResult(BaseModel):
    verdict: Verdict
    reason: str
    failed_metric: str | None = Field(None, description="error_rate, ttft_p50 or ttft_p99 when FAIL.")
    candidate: TrackSample
    baseline: TrackSample


def judge(cand: TrackSample, base: TrackSample, limits: AnalysisLimits) -> AnalysisResult:
    """Compare a candidate track with its baseline measured in the same window.

    Errors are judged first: a candidate that fails requests fails even with few samples once the
    failures alone exceed the limit at min_samples, because waiting for more data only serves
    more users errors.
    """

    def result(verdict: Verdict, reason: str, metric: str | None = None) -> AnalysisResult:
        return AnalysisResult(
            verdict=verdict, reason=reason, failed_metric=metric, candidate=cand, baseline=base
        )

    if cand.errors > limits.max_error_rate * max(cand.requests, limits.min_samples):
        return result(
            Verdict.FAIL,
            f"{cand.track} error rate {cand.error_rate:.1%} ({cand.errors}/{cand.requests}) "
            f"> limit {limits.max_error_rate:.1%}",
            "error_rate",
        )
    if cand.requests < limits.min_samples or base.requests < limits.min_samples:
        return result(
            Verdict.INCONCLUSIVE,
            f"too few samples: {cand.track} {cand.requests}, {base.track} {base.requests} "
            f"(need {limits.min_samples} each)",
        )
    for metric, limit in (("ttft_p99", limits.max_ttft_p99_ratio), ("ttft_p50", limits.max_ttft_p50_ratio)):
        c = getattr(cand, f"{metric}_ms")
        b = getattr(base, f"{metric}_ms")
        if c is None or b is None:
            return result(Verdict.INCONCLUSIVE, f"no {metric} measured")
        # A floor of 1 ms keeps a near-zero baseline from turning jitter into a huge ratio.
        ratio = c / max(b, 1.0)
        if ratio > limit:
            return result(
                Verdict.FAIL,
                f"{cand.track} {metric} {c:.0f} ms is {ratio:.1f}x {base.track} ({b:.0f} ms) > limit {limit:g}x",
                metric,
            )
    return result(
        Verdict.PASS,
        f"{cand.track} error {cand.error_rate:.1%}, ttft p50 {cand.ttft_p50_ms:.0f} ms / p99 "
        f"{cand.ttft_p99_ms:.0f} ms vs {base.track} p50 {base.ttft_p50_ms:.0f} / p99 {base.ttft_p99_ms:.0f} ms",
    )


# --- Upgrade ------------------------------------------------------------------------------------


class Strategy(StrEnum):
    CANARY = "canary"
    BLUE_GREEN = "blue-green"


class UpgradeRequest(BaseModel):
    spec: FleetSpec = Field(description="The fleet, snapshotted from the config at start.")
    upgrade_id: str
    release: Release
    strategy: Strategy = Strategy.CANARY
    regions: list[str] = Field(description="Waves, one region at a time, in this order.")
    namespaces: dict[str, str] = Field(description="Workload namespace per region (backed up first).")
    app: str = Field(description="workload.app: Deployment names are <app>-<track>.")
    steps_percent: list[int]
    step_pause_s: float
    limits: AnalysisLimits
    scale_down_delay_s: float
    approval_between_regions: bool = False
    warmup_prompts: int = 8
    max_inconclusive: int = Field(
        3, description="Inconclusive analyses in a row before the workflow pauses for an operator."
    )


class Outcome(StrEnum):
    SUCCEEDED = "SUCCEEDED"
    ROLLED_BACK = "ROLLED_BACK"
    ABORTED = "ABORTED"
    BACKUP_FAILED = "BACKUP_FAILED"
    FAILED = "FAILED"


class RegionWave(BaseModel):
    region: str
    outcome: Outcome | None = None
    step_percent: int = 0
    analyses: list[AnalysisResult] = Field(default_factory=list)
    reason: str = ""


class UpgradeStatus(BaseModel):
    """The query `status` answer, and the workflow's one state object."""

    phase: str = "starting"
    region: str | None = None
    step_percent: int = 0
    paused: bool = False
    pause_reason: str = ""
    backup: BackupInfo | None = None
    waves: list[RegionWave] = Field(default_factory=list)
    awaiting_approval: bool = False


class UpgradeResult(BaseModel):
    upgrade_id: str
    image: str
    strategy: Strategy
    outcome: Outcome
    reason: str
    failed_metric: str | None = None
    failed_region: str | None = None
    backup: BackupInfo | None = None
    waves: list[RegionWave] = Field(default_factory=list)


class OperatorAction(BaseModel):
    """Body of the promote / abort / pause / resume / approve updates."""

    reason: str = ""
    by: str = "operator"


class ControlAck(BaseModel):
    accepted: bool
    message: str


# --- Activity I/O for the upgrade steps ---------------------------------------------------------


class Release(BaseModel):
    """What an upgrade ships: an image and, optionally, container env changes (model flags)."""

    image: str
    env: dict[str, str] = Field(default_factory=dict, description="Env vars set on the serving container.")
    replace_env: bool = Field(False, description="Replace the container env instead of merging into it.")


class TrackDeployRequest(BaseModel):
    region: str
    track: str = Field(description="canary or green.")
    release: Release
    replicas: int


class TrackWeightsRequest(BaseModel):
    region: str
    weights: dict[str, int]


class RegionTrackRequest(BaseModel):
    region: str
    track: str


class PromoteRequest(BaseModel):
    region: str
    release: Release


class WarmupRequest(BaseModel):
    region: str
    track: str
    prompts: int = 8


class WarmupResult(BaseModel):
    region: str
    track: str
    replicas: int
    ok: int
    failed: int


# --- Migration ----------------------------------------------------------------------------------


class MigrationRequest(BaseModel):
    spec: FleetSpec
    migration_id: str
    source: str
    target: str
    namespace: str = Field(description="Workload namespace in the source cluster.")
    target_namespace: str = Field(description="Namespace in the target cluster (Velero namespaceMapping).")
    app: str
    steps_percent: list[int]
    step_pause_s: float
    limits: AnalysisLimits
    decommission_source: bool = False
    warmup_prompts: int = 8


class MigrationStatus(BaseModel):
    phase: str = "starting"
    step_percent: int = 0
    backup: BackupInfo | None = None
    restore: BackupInfo | None = None
    weights: dict[str, int] = Field(default_factory=dict)
    analyses: list[AnalysisResult] = Field(default_factory=list)


class MigrationResult(BaseModel):
    migration_id: str
    source: str
    target: str
    outcome: Outcome
    reason: str
    failed_metric: str | None = None
    backup: BackupInfo | None = None
    restore: BackupInfo | None = None
    weights: dict[str, int] = Field(default_factory=dict)
    decommissioned: bool = False


# --- building requests from the fleet config (CLI and tests) ---------------------------------------


def limits_from(cfg: FleetConfig) -> AnalysisLimits:
    u = cfg.upgrade
    return AnalysisLimits(max_error_rate=u.max_error_rate, max_ttft_p50_ratio=u.max_ttft_p50_ratio,
                          max_ttft_p99_ratio=u.max_ttft_p99_ratio, min_samples=u.min_samples)


def upgrade_request(
    cfg: FleetConfig,
    upgrade_id: str,
    image: str,
    strategy: Strategy = Strategy.CANARY,
    regions: list[str] | None = None,
    steps_percent: list[int] | None = None,
    env: dict[str, str] | None = None,
) -> UpgradeRequest:
    names = regions or cfg.region_names
    return UpgradeRequest(
        spec=FleetSpec.from_config(cfg), upgrade_id=upgrade_id, release=Release(image=image, env=env or {}),
        strategy=strategy, regions=names,
        namespaces={r: cfg.region(r).kube.namespace for r in names}, app=cfg.workload.app,
        steps_percent=steps_percent or list(cfg.upgrade.steps_percent), step_pause_s=cfg.upgrade.step_pause_s,
        limits=limits_from(cfg), scale_down_delay_s=cfg.upgrade.scale_down_delay_s,
        approval_between_regions=cfg.upgrade.approval_between_regions,
    )


def migration_request(
    cfg: FleetConfig, migration_id: str, source: str, target: str, target_namespace: str | None = None,
    steps_percent: list[int] | None = None, decommission_source: bool = False,
) -> MigrationRequest:
    ns = cfg.region(source).kube.namespace
    return MigrationRequest(
        spec=FleetSpec.from_config(cfg), migration_id=migration_id, source=source, target=target, namespace=ns,
        target_namespace=target_namespace or cfg.region(target).kube.namespace, app=cfg.workload.app,
        steps_percent=steps_percent or list(cfg.upgrade.steps_percent), step_pause_s=cfg.upgrade.step_pause_s,
        limits=limits_from(cfg), decommission_source=decommission_source,
    )
