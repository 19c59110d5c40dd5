"""Models of a migration between clusters: request, live status and result."""

from __future__ import annotations

from pydantic import BaseModel, Field

from drctl.config.schema import FleetConfig
from drctl.models.analysis import AnalysisLimits, AnalysisResult, limits_from
from drctl.models.backup import BackupInfo
from drctl.models.fleet_spec import FleetSpec
from drctl.models.rpo import ArtifactsResult
from drctl.models.upgrade import ReleaseOutcome


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


class MigrationResult(ReleaseOutcome):
    migration_id: str
    source: str
    target: str
    restore: BackupInfo | None = None
    weights: dict[str, int] = Field(default_factory=dict)
    decommissioned: bool = False
    artifacts: ArtifactsResult | None = Field(
        None, description="Model artifacts copied and verified with rclone."
    )
    failed_step: str | None = Field(None, description="The phase that failed or was aborted, e.g. shift-50.")
    rollback: list[str] = Field(
        default_factory=list, description="What the rollback undid, in order; a step that failed says so."
    )


def migration_request(
    cfg: FleetConfig,
    migration_id: str,
    source: str,
    target: str,
    target_namespace: str | None = None,
    steps_percent: list[int] | None = None,
    decommission_source: bool = False,
) -> MigrationRequest:
    ns = cfg.region(source).kube.namespace
    return MigrationRequest(
        spec=FleetSpec.from_config(cfg),
        migration_id=migration_id,
        source=source,
        target=target,
        namespace=ns,
        target_namespace=target_namespace or cfg.region(target).kube.namespace,
        app=cfg.workload.app,
        steps_percent=steps_percent or list(cfg.upgrade.steps_percent),
        step_pause_s=cfg.upgrade.step_pause_s,
        limits=limits_from(cfg),
        decommission_source=decommission_source,
    )
