"""Small protocols the activities code against. Implementations are plain Python, no Temporal."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel, Field

from drctl.models.gitops import GitOpsManaged


class AppliedWeights(BaseModel):
    """What the global tier said when it accepted a weight change."""

    change_id: str | None = Field(None, description="The tier's id for the change (Route 53 ChangeInfo.Id).")
    propagated: bool = Field(description="True when the change is already in effect everywhere (HAProxy).")
    status: str = Field(description="The tier's own word: PENDING/INSYNC for Route 53, applied for HAProxy.")


class GlobalTraffic(Protocol):
    """Global tier: region weights (Route 53 weighted records, HAProxy global backend).

    A change is two steps, because on Route 53 accepting a change and serving it everywhere are
    minutes apart: `apply_weights` returns as soon as the tier accepted the change, and
    `is_propagated` reports whether it is in effect everywhere. A synchronous tier (HAProxy) answers
    `propagated=True` from `apply_weights`, so callers never wait on it.
    """

    def get_weights(self) -> dict[str, int]: ...

    def apply_weights(self, weights: dict[str, int]) -> AppliedWeights:
        """Submit all region weights at once (one change batch / one runtime session); do not wait."""

    def is_propagated(self, change_id: str) -> bool:
        """Whether the change `apply_weights` returned is in effect everywhere (Route 53: INSYNC)."""

    def set_weights(self, weights: dict[str, int]) -> None:
        """apply_weights, then block until propagated (for scripts and the dev stack, not workflows)."""

    def data_plane_out(self) -> dict[str, str]:
        """Regions the tier's own health checks have taken out of rotation, and why: what moves users
        while drctl cannot (HAProxy's server checks, Route 53's health checks). Empty: none, or the
        tier has no checks."""


class RegionalTraffic(Protocol):
    """Regional tier: track weights inside one region (stable/canary/blue/green)."""

    def get_track_weights(self, region: str) -> dict[str, int]: ...

    def set_track_weights(self, region: str, weights: dict[str, int]) -> list[GitOpsManaged] | None:
        """Set the weights; the fields written on an object Argo CD tracks (None: the tier has no
        such object, as HAProxy's runtime API has not)."""


class DeploymentState(BaseModel):
    name: str
    namespace: str
    generation: int = 0
    observed_generation: int = 0
    replicas: int = Field(0, description="spec.replicas")
    status_replicas: int = Field(
        0, description="status.replicas: pods of every ReplicaSet, old ones pending termination included"
    )
    updated_replicas: int = 0
    ready_replicas: int = 0
    available_replicas: int = 0
    image: str | None = None
    hpa_min_replicas: int | None = None
    hpa_max_replicas: int | None = None
    gitops: str | None = Field(None, description="Argo CD's tracking marker on the Deployment, key=value.")
    also_managed: list[GitOpsManaged] = Field(
        default_factory=list,
        description="A scale's writes on other objects Argo CD tracks (the HPA targeting the Deployment), "
        "each with the marker read from the object written.",
    )

    @property
    def rolled_out(self) -> bool:
        """The condition `kubectl rollout status` waits for, old replicas gone included."""
        return self.missing() is None

    def missing(self) -> str | None:
        """What `kubectl rollout status` would still wait for (rollout_status.go); None when rolled out."""
        gaps = []
        if self.observed_generation < self.generation:
            gaps.append(f"observedGeneration {self.observed_generation} < generation {self.generation}")
        if self.updated_replicas < self.replicas:
            gaps.append(f"updatedReplicas {self.updated_replicas}/{self.replicas}")
        if self.status_replicas > self.updated_replicas:
            gaps.append(f"{self.status_replicas - self.updated_replicas} old replicas pending termination")
        if self.available_replicas < self.replicas:
            gaps.append(f"availableReplicas {self.available_replicas}/{self.replicas}")
        if self.ready_replicas < self.replicas:
            gaps.append(f"readyReplicas {self.ready_replicas}/{self.replicas}")
        return "; ".join(gaps) or None


class Platform(Protocol):
    """One region's Kubernetes cluster."""

    region: str

    def get_deployment(self, name: str) -> DeploymentState: ...

    def scale(self, name: str, replicas: int) -> DeploymentState:
        """Set spec.replicas and, where an HPA targets the Deployment, its minReplicas."""

    def wait_rollout(
        self,
        name: str,
        timeout_s: float,
        on_progress: Callable[[DeploymentState], None] | None = None,
        load_allowance_s: float | None = None,
        max_timeout_s: float | None = None,
    ) -> DeploymentState:
        """Wait as `kubectl rollout status` does; with `load_allowance_s`, up to the Deployment's
        progressDeadlineSeconds plus that allowance if longer (never past `max_timeout_s`)."""
