"""Scaling or re-imaging a Deployment that Argo CD tracks is recorded, against the emulated API
server: the annotation (Argo CD's default tracking) or the instance label (the older method)."""

from __future__ import annotations

import yaml

from drctl.config.schema import load_config
from drctl.models.gitops import argocd_tracking
from drctl.models.upgrade import Release
from drctl.providers.kubernetes import KubernetesPlatform
from drctl.providers.workload import Workload
from tests.support.config import fleet_config_data, short_tmp_dir
from tests.support.kube_cluster import deployment_manifest

TRACKING_ID = "llm-us-west-1:apps/Deployment:drctl-test/llm-stable"


def _deploy(
    platform: KubernetesPlatform, name: str, annotations: dict | None = None, labels: dict | None = None
) -> None:
    manifest = deployment_manifest(name)
    manifest["metadata"]["annotations"] = annotations or {}
    manifest["metadata"]["labels"].update(labels or {})
    platform.delete_deployment(name)
    platform.apply_deployment(manifest)


def test_scale_reports_argo_cd_tracking(platform: KubernetesPlatform) -> None:
    _deploy(platform, "llm-stable", annotations={"argocd.argoproj.io/tracking-id": TRACKING_ID})
    assert platform.scale("llm-stable", 3).gitops == f"argocd.argoproj.io/tracking-id={TRACKING_ID}"
    _deploy(platform, "llm-canary", labels={"app.kubernetes.io/instance": "llm-us-west-1"})
    assert platform.scale("llm-canary", 1).gitops == "app.kubernetes.io/instance=llm-us-west-1"
    _deploy(platform, "llm-green")
    assert platform.scale("llm-green", 1).gitops is None


def test_promoting_stable_reports_argo_cd_tracking(platform: KubernetesPlatform) -> None:
    path = short_tmp_dir("drctl-gitops-") / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_config_data()))
    workload = Workload(load_config(path), platform)
    _deploy(platform, "llm-stable", annotations={"argocd.argoproj.io/tracking-id": TRACKING_ID})
    tracking = workload.set_stable_release(Release(image="vllm/vllm-openai:v0.6.4"))
    assert tracking == f"argocd.argoproj.io/tracking-id={TRACKING_ID}"
    assert platform.get_deployment("llm-stable").image == "vllm/vllm-openai:v0.6.4"
    # Already there (a retried activity): nothing is changed, and the marker is still reported.
    assert workload.set_stable_release(Release(image="vllm/vllm-openai:v0.6.4")) == tracking


def test_the_annotation_wins_over_the_label_and_empty_values_do_not_count() -> None:
    both = argocd_tracking({"app.kubernetes.io/instance": "a"}, {"argocd.argoproj.io/tracking-id": "b"})
    assert both == "argocd.argoproj.io/tracking-id=b"
    assert argocd_tracking({"app.kubernetes.io/instance": ""}, {}) is None
    assert argocd_tracking(None, None) is None


def test_candidate_tracks_do_not_inherit_the_argo_cd_marker(platform: KubernetesPlatform) -> None:
    """With label tracking, a canary carrying stable's instance label would be pruned by Argo CD."""
    path = short_tmp_dir("drctl-gitops-") / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_config_data()))
    workload = Workload(load_config(path), platform)
    _deploy(
        platform,
        "llm-stable",
        annotations={"argocd.argoproj.io/tracking-id": TRACKING_ID},
        labels={"app.kubernetes.io/instance": "llm-us-west-1"},
    )
    workload.deploy_track("canary", Release(image="vllm/vllm-openai:v0.6.4"), 1)
    canary = platform.apps.read_namespaced_deployment("llm-canary", platform.namespace)
    assert "app.kubernetes.io/instance" not in (canary.metadata.labels or {})
    assert "argocd.argoproj.io/tracking-id" not in (canary.metadata.annotations or {})
    assert platform.get_deployment("llm-canary").gitops is None
    # Stable keeps its marker: it is still Argo CD's.
    assert platform.get_deployment("llm-stable").gitops == f"argocd.argoproj.io/tracking-id={TRACKING_ID}"
