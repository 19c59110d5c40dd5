"""Models of an upgrade: request, operator control, live status, result, and step activity I/O.

Workflows import these through `imports_passed_through`, so this module stays free of I/O.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field

from drctl.config.schema import FleetConfig
from drctl.models.analysis import AnalysisLimits, AnalysisResult, limits_from
from drctl.models.backup import BackupInfo
from drctl.models.fleet_spec import FleetSpec
from drctl.models.gitops import ENV, GITOPS_DESCRIPTION, IMAGE, GitOpsManaged, gitops_field


class Release(BaseModel):
    """What an upgrade ships: an image and, optionally, container env changes (model flags)."""

    image: str
    env: dict[str, str] = Field(default_factory=dict, description="Env vars set on the serving container.")
    replace_env: bool = Field(False, description="Replace the container env instead of merging into it.")
    value_from: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Env vars read from a Secret or ConfigMap (`valueFrom`), e.g. HF_TOKEN: kept as references, "
        "never as values, so a rollback restores them and no secret enters the history.",
    )
    gitops: str | None = Field(
        None, description="Set by set_stable_release: Argo CD's tracking marker on the stable Deployment."
    )

    @property
    def fields_written(self) -> list[str]:
        """The stable Deployment's fields a rollout to this release writes (see apply_release)."""
        return [IMAGE, ENV] if self.env or self.value_from or self.replace_env else [IMAGE]


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
    # A rollback step failed: the region is neither upgraded nor back where it was.
    ROLLBACK_FAILED = "ROLLBACK_FAILED"
    ABORTED = "ABORTED"
    BACKUP_FAILED = "BACKUP_FAILED"
    FAILED = "FAILED"
    # Yielded to a failover (DR first): traffic steps rolled back or stopped; the reason says which.
    PREEMPTED = "PREEMPTED"


def failure(what: str, outcome: Outcome, reason: str) -> str | None:
    """Why an upgrade or migration ends Failed in the UI; None when it succeeded."""
    return None if outcome is Outcome.SUCCEEDED else f"{what} {outcome.value}: {reason}"


class RegionWave(BaseModel):
    region: str
    outcome: Outcome | None = None
    step_percent: int = 0
    analyses: list[AnalysisResult] = Field(default_factory=list)
    reason: str = ""
    left_behind: list[str] = Field(
        default_factory=list,
        description="What a failed rollback could not undo in this region, one line each.",
    )
    stable_image: str | None = Field(
        None, description="Set when a failed rollback left stable on this image instead of the one it had."
    )


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


class RegionRelease(BaseModel):
    """What one region runs when the upgrade ends. Waves that finished keep the new release when a
    later one rolls back (a proven region is not churned again), so a mixed fleet is spelled out."""

    region: str
    image: str = Field(description="The stable Deployment's image at the end.")
    state: Literal["upgraded", "rolled-back", "rollback-failed", "not-started"]
    left_behind: list[str] = Field(
        default_factory=list, description="For rollback-failed: what is still there."
    )


class ReleaseOutcome(BaseModel):
    """What an upgrade and a migration both end with: the verdict, its reason, the backup taken first."""

    outcome: Outcome
    reason: str
    failed_metric: str | None = None
    backup: BackupInfo | None = None
    gitops_managed: list[GitOpsManaged] = Field(default_factory=gitops_field, description=GITOPS_DESCRIPTION)


class UpgradeResult(ReleaseOutcome):
    upgrade_id: str
    image: str
    strategy: Strategy
    failed_region: str | None = None
    waves: list[RegionWave] = Field(default_factory=list)
    releases: list[RegionRelease] = Field(
        default_factory=list, description="Per region, in wave order: the release it ended on."
    )


class OperatorAction(BaseModel):
    """Body of the promote / abort / pause / resume / approve updates."""

    reason: str = ""
    by: str = "operator"


class ControlAck(BaseModel):
    accepted: bool
    message: str


# --- Activity I/O for the upgrade steps ---------------------------------------------------------


class TrackDeployRequest(BaseModel):
    region: str
    track: str = Field(description="canary or green.")
    release: Release
    replicas: int


class TrackWeightsRequest(BaseModel):
    region: str
    weights: dict[str, int]


class TrackWeightsResult(TrackWeightsRequest):
    """The weights the tier reports after the change, and what it wrote on an object Argo CD tracks."""

    gitops_managed: list[GitOpsManaged] = Field(
        default_factory=gitops_field,
        description="The HTTPRoute's fields written, when it carries Argo CD's marker (empty for HAProxy).",
    )


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
        spec=FleetSpec.from_config(cfg),
        upgrade_id=upgrade_id,
        release=Release(image=image, env=env or {}),
        strategy=strategy,
        regions=names,
        namespaces={r: cfg.region(r).kube.namespace for r in names},
        app=cfg.workload.app,
        steps_percent=steps_percent or list(cfg.upgrade.steps_percent),
        step_pause_s=cfg.upgrade.step_pause_s,
        limits=limits_from(cfg),
        scale_down_delay_s=cfg.upgrade.scale_down_delay_s,
        approval_between_regions=cfg.upgrade.approval_between_regions,
    )
