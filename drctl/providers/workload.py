"""Track manifests: a canary or green Deployment and Service derived from the stable ones.

The candidate copies the stable pod template (env, resources, probes, model arguments), so the
only differences under test are the image and the track label. Reading goes through the
platform provider's API client, so errors come out of the same error table.
"""

from __future__ import annotations

import copy
from typing import Any

from drctl.config.schema import FleetConfig
from drctl.models.gitops import TRACKING_ANNOTATION, TRACKING_LABEL, argocd_tracking
from drctl.models.upgrade import Release
from drctl.providers.errors import ProviderError
from drctl.providers.kube_objects import as_copy
from drctl.providers.kubernetes import REQUEST_TIMEOUT, KubernetesPlatform

TRACK_LABEL = "drctl.io/track"


def read_manifest(platform: KubernetesPlatform, kind: str, name: str) -> dict[str, Any]:
    """A Deployment or Service as a plain dict, as the API server returned it."""

    def read() -> Any:
        if kind == "Deployment":
            return platform.apps.read_namespaced_deployment(
                name, platform.namespace, _request_timeout=REQUEST_TIMEOUT
            )
        return platform.core.read_namespaced_service(
            name, platform.namespace, _request_timeout=REQUEST_TIMEOUT
        )

    obj = platform._call(f"get {kind.lower()}s {platform.namespace}/{name}", read)
    return platform.api_client.sanitize_for_serialization(obj)


def _retag(labels: dict[str, str] | None, track: str) -> dict[str, str]:
    return {**(labels or {}), TRACK_LABEL: track}


def _as_new_object(obj: dict[str, Any], name: str, track: str) -> dict[str, Any]:
    """A copy without what the server set on the original (see as_copy), renamed and moved to `track`."""
    out = as_copy(obj)
    meta = out["metadata"]
    meta["name"] = name
    meta["labels"] = _retag(meta.get("labels"), track)
    # A copy of an object Argo CD tracks must not carry its marker: with label tracking, Argo CD would
    # count the candidate as part of the Application and prune it in the middle of the upgrade.
    meta["labels"].pop(TRACKING_LABEL, None)
    (meta.get("annotations") or {}).pop(TRACKING_ANNOTATION, None)
    return out


def candidate_deployment(
    stable: dict[str, Any], name: str, track: str, release: Release, replicas: int
) -> dict[str, Any]:
    """The stable Deployment with a new name, track label, release and replica count."""
    dep = _as_new_object(apply_release(stable, release), name, track)
    spec = dep["spec"]
    spec["replicas"] = replicas
    # A distinct selector keeps the stable ReplicaSet and the candidate's apart.
    spec["selector"] = {"matchLabels": _retag((spec.get("selector") or {}).get("matchLabels"), track)}
    template = spec["template"]
    template.setdefault("metadata", {})["labels"] = _retag(template["metadata"].get("labels"), track)
    return dep


def apply_release(deployment: dict[str, Any], release: Release) -> dict[str, Any]:
    """The Deployment with its serving container on the release's image and env (a rolling update)."""
    dep = copy.deepcopy(deployment)
    dep.pop("status", None)
    container = dep["spec"]["template"]["spec"]["containers"][0]
    container["image"] = release.image
    env = [] if release.replace_env else list(container.get("env") or [])
    entries: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in release.env.items()]
    entries += [{"name": k, "valueFrom": copy.deepcopy(v)} for k, v in release.value_from.items()]
    for entry in entries:
        env = [e for e in env if e.get("name") != entry["name"]] + [entry]
    if env or release.replace_env:
        container["env"] = env
    return dep


def release_of(deployment: dict[str, Any]) -> Release:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    entries = container.get("env") or []
    env = {e["name"]: e.get("value", "") for e in entries if "valueFrom" not in e}
    # valueFrom entries (HF_TOKEN from a Secret) are kept as references: a rollback that dropped
    # them would leave the old release without its credentials.
    refs = {e["name"]: e["valueFrom"] for e in entries if "valueFrom" in e}
    return Release(image=container.get("image", ""), env=env, replace_env=True, value_from=refs)


def candidate_service(stable: dict[str, Any], name: str, track: str) -> dict[str, Any]:
    svc = _as_new_object(stable, name, track)
    spec = svc.setdefault("spec", {})
    spec["selector"] = _retag(spec.get("selector"), track)
    return svc


class Workload:
    """The inference workload's tracks in one region."""

    def __init__(self, cfg: FleetConfig, platform: KubernetesPlatform) -> None:
        self.cfg = cfg
        self.platform = platform

    def name(self, track: str) -> str:
        return self.cfg.workload.deployment_name(track)

    def deploy_track(self, track: str, release: Release, replicas: int) -> None:
        """Create or update the candidate track from the stable one (idempotent)."""
        stable = read_manifest(self.platform, "Deployment", self.name("stable"))
        self.platform.apply_deployment(
            candidate_deployment(stable, self.name(track), track, release, replicas)
        )
        try:
            stable_svc = read_manifest(self.platform, "Service", self.name("stable"))
        except ProviderError as exc:
            if exc.error.kind != "NotFound":
                raise
            return  # a platform without track Services (the regional tier routes by other means)
        self.platform.apply_service(candidate_service(stable_svc, self.name(track), track))

    def remove_track(self, track: str) -> bool:
        """Delete the track's Deployment and Service; False if nothing was there."""
        if track == "stable":
            raise ValueError("the stable track is never removed")
        gone = self.platform.delete_deployment(self.name(track))
        name = self.name(track)
        try:
            self.platform._call(
                f"delete services {self.platform.namespace}/{name}",
                lambda: self.platform.core.delete_namespaced_service(
                    name, self.platform.namespace, _request_timeout=REQUEST_TIMEOUT
                ),
            )
        except ProviderError as exc:
            if exc.error.kind != "NotFound":
                raise
        return gone

    def set_stable_release(self, release: Release) -> str | None:
        """Roll stable to the release; returns Argo CD's tracking marker on it, if it has one."""
        stable = read_manifest(self.platform, "Deployment", self.name("stable"))
        meta = stable.get("metadata") or {}
        tracking = argocd_tracking(meta.get("labels"), meta.get("annotations"))
        new = apply_release(stable, release)
        if new["spec"] == stable["spec"]:
            return tracking  # already there: a retried activity must not restart the replicas again
        self.platform.apply_deployment(new)
        return tracking

    def stable_release(self) -> Release:
        return release_of(read_manifest(self.platform, "Deployment", self.name("stable")))
