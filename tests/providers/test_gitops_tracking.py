"""Scaling, re-imaging or re-weighting an object that Argo CD tracks is recorded, against the emulated
API server: the annotation (Argo CD's default tracking) or the instance label (the older method), on
the Deployment, the HPA a scale moves and the HTTPRoute a weight change rewrites."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client
from temporalio.testing import ActivityEnvironment

from activities.platform import PlatformActivities
from activities.upgrade import UpgradeActivities
from drctl.config.schema import load_config
from drctl.models.activity_io import ScaleInput
from drctl.models.gitops import (
    OWNED,
    TRACKING_ANNOTATION,
    TRACKING_LABEL,
    GitOpsManaged,
    argocd_tracking,
    changes,
    note_all,
)
from drctl.models.upgrade import Release, TrackWeightsRequest
from drctl.providers.gateway_api import GatewayApiRegionalTraffic
from drctl.providers.kubernetes import KubernetesPlatform
from drctl.providers.workload import Workload
from tests.support.config import fleet_config_data, one_region_config, short_tmp_dir
from tests.support.kube_cluster import NS, deployment_manifest
from tests.support.kubeapi import http_route, routes

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


# --- the other objects drctl writes: the HPA a scale moves, the HTTPRoute a weight change rewrites ---

ROUTE_ID = "llm-us-west-1:gateway.networking.k8s.io/HTTPRoute:inference/llm"
HPA_ID = "llm-us-west-1:autoscaling/HorizontalPodAutoscaler:inference/llm-stable"


def _hpa(platform: KubernetesPlatform, target: str, annotations: dict | None = None) -> None:
    """An HPA for `target` (bounds 2..4), named after it as the dev stack's is; replaced if there."""
    auto = client.AutoscalingV2Api(platform.api_client)
    with contextlib.suppress(client.ApiException):
        auto.delete_namespaced_horizontal_pod_autoscaler(target, NS)
    body: Any = {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": target, "namespace": NS, "annotations": annotations or {}},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                 "minReplicas": 2, "maxReplicas": 4},
    }  # fmt: skip
    auto.create_namespaced_horizontal_pod_autoscaler(NS, body)


def _fields(found: list[GitOpsManaged]) -> list[tuple[str, str, str, str]]:
    return [(g.kind, g.name, g.field, g.tracking) for g in found]


def test_scale_records_the_tracked_hpa_it_moves_with_the_marker_read_from_it(
    platform: KubernetesPlatform,
) -> None:
    _deploy(platform, "llm-stable")
    _hpa(platform, "llm-stable", annotations={TRACKING_ANNOTATION: HPA_ID})
    up = platform.scale("llm-stable", 3)
    assert up.gitops is None  # the Deployment itself is not Argo CD's here: only the HPA is
    assert _fields(up.also_managed) == [
        ("HorizontalPodAutoscaler", "llm-stable", "spec.minReplicas", f"{TRACKING_ANNOTATION}={HPA_ID}")
    ]
    beyond = platform.scale("llm-stable", 6)  # past the HPA's max: both bounds are written
    assert [g.field for g in beyond.also_managed] == ["spec.minReplicas", "spec.maxReplicas"]
    assert all(g.region == "us-west-1" for g in beyond.also_managed)
    # The fields recorded are the ones the docs and the example Application own.
    assert {g.field for g in beyond.also_managed} <= set(OWNED["HorizontalPodAutoscaler"])


def test_scale_records_nothing_for_an_untracked_hpa(platform: KubernetesPlatform) -> None:
    _deploy(platform, "llm-stable", annotations={TRACKING_ANNOTATION: TRACKING_ID})
    _hpa(platform, "llm-stable")
    state = platform.scale("llm-stable", 3)
    assert state.hpa_min_replicas == 3  # it was moved ...
    assert state.also_managed == []  # ... but carries no marker: nothing to record
    assert state.gitops == f"{TRACKING_ANNOTATION}={TRACKING_ID}"


@pytest.fixture
def route(platform: KubernetesPlatform) -> Iterator[Callable[[dict[str, str]], None]]:
    """Track Services and a fresh HTTPRoute `llm` (stable 100) with the labels the test gives."""
    core = client.CoreV1Api(platform.api_client)
    custom = client.CustomObjectsApi(platform.api_client)
    for track, port in (("stable", 8000), ("canary", 8001)):
        with contextlib.suppress(client.ApiException):
            core.delete_namespaced_service(f"llm-{track}", NS)
        svc: Any = {"metadata": {"name": f"llm-{track}"}, "spec": {"ports": [{"port": port}]}}
        core.create_namespaced_service(NS, svc)

    def make(labels: dict[str, str], annotations: dict[str, str] | None = None) -> None:
        body = http_route("llm", [{"name": "llm-stable", "port": 8000, "weight": 100}], parent="gateway")
        body["metadata"] |= {"labels": labels, "annotations": annotations or {}}
        custom.create_namespaced_custom_object(*routes(NS), body)

    yield make
    custom.delete_namespaced_custom_object(*routes(NS), "llm")


def _gateway(platform: KubernetesPlatform) -> GatewayApiRegionalTraffic:
    return GatewayApiRegionalTraffic({"us-west-1": platform.api_client}, {"us-west-1": NS}, "llm", "llm")


def test_a_weight_change_records_each_field_it_wrote_on_a_tracked_route(
    platform: KubernetesPlatform, route: Callable[..., None]
) -> None:
    route({TRACKING_LABEL: "llm-us-west-1"})
    gw = _gateway(platform)
    marker = f"{TRACKING_LABEL}=llm-us-west-1"
    # First change: the canary's backendRef is added and the region-header filter written.
    first = gw.set_track_weights("us-west-1", {"stable": 90, "canary": 10})
    assert _fields(first) == [
        ("HTTPRoute", "llm", "spec.rules[].backendRefs[].weight", marker),
        ("HTTPRoute", "llm", "spec.rules[].backendRefs", marker),
        ("HTTPRoute", "llm", "spec.rules[].filters", marker),
    ]
    assert {g.field for g in first} <= set(OWNED["HTTPRoute"])
    # Later steps change weights only; so does a retry that finds them already set.
    assert [g.field for g in gw.set_track_weights("us-west-1", {"stable": 50, "canary": 50})] == [
        "spec.rules[].backendRefs[].weight"
    ]
    assert [g.field for g in gw.set_track_weights("us-west-1", {"stable": 50, "canary": 50})] == [
        "spec.rules[].backendRefs[].weight"
    ]


def test_a_weight_change_on_an_untracked_route_records_nothing(
    platform: KubernetesPlatform, route: Callable[..., None]
) -> None:
    route({"app": "llm"})
    gw = _gateway(platform)
    assert gw.set_track_weights("us-west-1", {"stable": 90, "canary": 10}) == []
    assert gw.get_track_weights("us-west-1") == {"stable": 90, "canary": 10}  # it was written


def test_the_activities_return_what_they_wrote_on_tracked_objects(
    cluster: tuple[Any, str], platform: KubernetesPlatform, route: Callable[..., None]
) -> None:
    """scale_deployment and set_track_weights, as a worker runs them: the workflow records these."""
    kube = f'{{api_url: "{cluster[1]}", namespace: {NS}}}'
    cfg = one_region_config("gitops", "http://127.0.0.1:1", kube, "workload: {app: llm}")
    route({}, {TRACKING_ANNOTATION: ROUTE_ID})
    _deploy(platform, "llm-stable", labels={TRACKING_LABEL: "llm-us-west-1"})
    _hpa(platform, "llm-stable", annotations={TRACKING_ANNOTATION: HPA_ID})
    env = ActivityEnvironment()
    scaled = env.run(PlatformActivities(cfg).scale_deployment, ScaleInput(region="us-west-1", replicas=3))
    assert _fields(scaled.scale_changes()) == [
        ("Deployment", "llm-stable", "spec.replicas", f"{TRACKING_LABEL}=llm-us-west-1"),
        ("HorizontalPodAutoscaler", "llm-stable", "spec.minReplicas", f"{TRACKING_ANNOTATION}={HPA_ID}"),
    ]
    got = env.run(
        UpgradeActivities(cfg).set_track_weights,
        TrackWeightsRequest(region="us-west-1", weights={"stable": 95, "canary": 5}),
    )
    assert got.weights == {"stable": 95, "canary": 5}
    assert [(g.region, g.kind, g.tracking) for g in got.gitops_managed] == [
        ("us-west-1", "HTTPRoute", f"{TRACKING_ANNOTATION}={ROUTE_ID}")
    ] * 3


def test_a_field_written_again_is_recorded_once_and_a_release_names_the_fields_it_writes() -> None:
    noted: list[GitOpsManaged] = []
    step = changes("us-west-1", "HTTPRoute", "llm", ["spec.rules[].backendRefs[].weight"], "k=v")
    for _ in range(3):  # a canary's three weight steps
        note_all(noted, step)
    assert noted == step
    assert Release(image="a").fields_written == ["spec.template.spec.containers[0].image"]
    # A rollback's release replaces the env as it was: the env is written too.
    assert Release(image="a", replace_env=True).fields_written == [
        "spec.template.spec.containers[0].image",
        "spec.template.spec.containers[0].env",
    ]
