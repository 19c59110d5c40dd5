"""Activity inputs and outputs shared by every workflow that moves traffic or scales."""

from __future__ import annotations

from pydantic import BaseModel, Field

from drctl.models.gitops import REPLICAS, GitOpsManaged, changes
from drctl.models.health import RegionProbe


class RegionRequest(BaseModel):
    region: str


class ProbeRequest(BaseModel):
    regions: list[str]


class ProbeBatch(BaseModel):
    """One probe round: a result per region (the prober never raises for an unhealthy target)."""

    probes: list[RegionProbe]
    unresolved: dict[str, str] = Field(
        default_factory=dict, description="Regions the worker's config does not define, with why: not probed."
    )


class Weights(BaseModel):
    weights: dict[str, int]


class SetWeightsInput(BaseModel):
    weights: dict[str, int]
    reason: str = ""


class DeploymentCounts(BaseModel):
    """A region's Deployment and its replica counts: what a capacity and a status both start with."""

    region: str
    deployment: str
    replicas: int
    ready_replicas: int


class Capacity(DeploymentCounts):
    max_replicas: int
    hpa_min_replicas: int | None = None
    hpa_max_replicas: int | None = None


class ScaleInput(BaseModel):
    region: str
    replicas: int
    deployment: str | None = Field(None, description="Default: the stable Deployment.")


class WaitRolloutInput(BaseModel):
    region: str
    timeout_s: float
    deployment: str | None = None


class DeploymentStatus(DeploymentCounts):
    updated_replicas: int
    available_replicas: int
    rolled_out: bool
    gitops: str | None = Field(None, description="Argo CD's tracking marker on the Deployment, if any.")
    also_managed: list[GitOpsManaged] = Field(
        default_factory=list,
        description="A scale's writes on other objects Argo CD tracks: the HPA's bounds, with its marker.",
    )

    def scale_changes(self) -> list[GitOpsManaged]:
        """What a scale to these replicas wrote on objects Argo CD tracks, for the result."""
        return (
            changes(self.region, "Deployment", self.deployment, [REPLICAS], self.gitops) + self.also_managed
        )


class VerifyInput(BaseModel):
    requests: int = Field(ge=1, le=1000)
    timeout_s: float = Field(gt=0, description="Deadline for the whole batch.")
    request_timeout_s: float = 3.0


class VerifyResult(BaseModel):
    total: int
    ok: int
    errors: int
    by_region: dict[str, int] = Field(
        default_factory=dict, description="Successes per region, from region_header."
    )
    unattributed: int = Field(
        0, description="Successes without the region header: served, but by an unknown region."
    )
    auth_rejected: int = Field(0, description="Answers 401/403: the global endpoint refused drctl's token.")
    region_header: str = Field("", description="The response header read for the serving region.")
    error_samples: list[str] = Field(default_factory=list)

    def served_by(self, regions: list[str]) -> int:
        return sum(self.by_region.get(r, 0) for r in regions)
