"""Objects a GitOps controller also manages: what drctl records when it changes one of them.

Argo CD marks the objects of an Application with its tracking annotation (the default since Argo CD
3.0) or, with the older label tracking method, the app.kubernetes.io/instance label. Self-heal then
reverts any live change that differs from Git unless the Application ignores that field
(docs/gitops.md), so an operation that scaled, re-imaged or re-weighted such an object says so in
its result. The activity that writes reads the marker from the object it wrote; workflows record it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, Field

TRACKING_ANNOTATION = "argocd.argoproj.io/tracking-id"
TRACKING_LABEL = "app.kubernetes.io/instance"

# The fields drctl writes on objects a GitOps controller may sync, as recorded in `field`. `[]` is
# every element of a list (the jq form Argo CD's jqPathExpressions use); `[0]` is the first.
REPLICAS = "spec.replicas"
IMAGE = "spec.template.spec.containers[0].image"
ENV = "spec.template.spec.containers[0].env"
HPA_MIN = "spec.minReplicas"
HPA_MAX = "spec.maxReplicas"
ROUTE_WEIGHTS = "spec.rules[].backendRefs[].weight"
ROUTE_REFS = "spec.rules[].backendRefs"
ROUTE_FILTERS = "spec.rules[].filters"

# Per kind, every field drctl can write on it (docs/gitops.md's table and the example manifests'
# ignore entries are kept equal to this by tests/test_gitops.py).
OWNED: dict[str, tuple[str, ...]] = {
    "Deployment": (REPLICAS, IMAGE, ENV),
    "HorizontalPodAutoscaler": (HPA_MIN, HPA_MAX),
    "HTTPRoute": (ROUTE_WEIGHTS, ROUTE_REFS, ROUTE_FILTERS),
}


class GitOpsManaged(BaseModel):
    region: str
    kind: str = "Deployment"
    name: str
    field: str = Field(
        description="What drctl changed, e.g. spec.replicas, spec.minReplicas or "
        "spec.rules[].backendRefs[].weight (older results: `image`)."
    )
    tracking: str = Field(description="The marker found, as key=value (annotation or label).")


def gitops_field() -> list[GitOpsManaged]:
    """The `gitops_managed` field of an operation's result (Field(default_factory=...) for pydantic)."""
    return []


GITOPS_DESCRIPTION = "Objects drctl changed that Argo CD also tracks: self-heal reverts them unless ignored."


def changes(
    region: str, kind: str, name: str, fields: Iterable[str], tracking: str | None
) -> list[GitOpsManaged]:
    """One entry per field written on an object carrying Argo CD's marker; none when it carries none."""
    if not tracking:
        return []
    return [GitOpsManaged(region=region, kind=kind, name=name, field=f, tracking=tracking) for f in fields]


def note_all(into: list[GitOpsManaged], found: Iterable[GitOpsManaged]) -> None:
    """Record entries an activity returned, once each: a canary's five weight steps are one change."""
    for entry in found:
        if entry not in into:
            into.append(entry)


def argocd_tracking(labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None) -> str | None:
    """`key=value` of the Argo CD marker on an object's metadata, or None when it carries none."""
    if annotations and annotations.get(TRACKING_ANNOTATION):
        return f"{TRACKING_ANNOTATION}={annotations[TRACKING_ANNOTATION]}"
    if labels and labels.get(TRACKING_LABEL):
        return f"{TRACKING_LABEL}={labels[TRACKING_LABEL]}"
    return None
