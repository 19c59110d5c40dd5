"""Objects a GitOps controller also manages: what drctl records when it changes one of them.

Argo CD marks the objects of an Application with its tracking annotation (the default since Argo CD
3.0) or, with the older label tracking method, the app.kubernetes.io/instance label. Self-heal then
reverts any live change that differs from Git unless the Application ignores that field
(docs/gitops.md), so an operation that scaled or re-imaged such an object says so in its result.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field

TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"
TRACKING_LABEL = "app.kubernetes.io/instance"


class GitOpsManaged(BaseModel):
    region: str
    kind: str = "Deployment"
    name: str
    field: str = Field(description="What drctl changed: spec.replicas, or the container image.")
    tracking: str = Field(description="The marker found, as key=value (annotation or label).")


def gitops_field() -> list[GitOpsManaged]:
    """The `gitops_managed` field of an operation's result (Field(default_factory=...) for pydantic)."""
    return []


GITOPS_DESCRIPTION = "Objects drctl changed that Argo CD also tracks: self-heal reverts them unless ignored."


def note_managed(
    into: list[GitOpsManaged], region: str, name: str, tracking: str | None, field: str = "spec.replicas"
) -> None:
    """Record a change drctl made to an object Argo CD tracks (`tracking` is its marker, or None)."""
    if tracking:
        into.append(GitOpsManaged(region=region, name=name, field=field, tracking=tracking))


def argocd_tracking(labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None) -> str | None:
    """`key=value` of the Argo CD marker on an object's metadata, or None when it carries none."""
    if annotations and annotations.get(TRACKING_ANNOTATION):
        return f"{TRACKING_ANNOTATION}={annotations[TRACKING_ANNOTATION]}"
    if labels and labels.get(TRACKING_LABEL):
        return f"{TRACKING_LABEL}={labels[TRACKING_LABEL]}"
    return None
