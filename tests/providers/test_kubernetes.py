"""KubernetesPlatform against the dev stack's emulated API server (drctl.devstack.kube).

The cluster runs on a background loop because the official client is synchronous. No controller
runs here: the tests write Deployment status through /status themselves, as the Deployment
controller (or the dev stack's node agent) would.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kubernetes import client

from drctl.providers.base import DeploymentState
from drctl.providers.errors import ProviderError, RolloutTimeout, classify
from drctl.providers.kubernetes import MERGE, KubernetesPlatform
from tests.support.kube_cluster import NS, RbacCluster, deployment_manifest
from tests.support.wait import wait_until


def _hpa(name: str, target: str, lo: int, hi: int) -> Any:
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
                 "minReplicas": lo, "maxReplicas": hi},
    }  # fmt: skip


def _write_status(p: KubernetesPlatform, name: str, **status: Any) -> None:
    """Play the Deployment controller: write status through the /status subresource."""
    p.apps.patch_namespaced_deployment_status(name, NS, {"status": status}, _content_type=MERGE)


def _deploy(
    p: KubernetesPlatform, name: str, replicas: int, hpa: tuple[int, int] | None = None
) -> DeploymentState:
    p.delete_deployment(name)
    if hpa:
        auto = client.AutoscalingV2Api(p.api_client)
        try:
            auto.delete_namespaced_horizontal_pod_autoscaler(f"{name}-autoscaler", NS)
        except client.ApiException:
            pass
        auto.create_namespaced_horizontal_pod_autoscaler(NS, _hpa(f"{name}-autoscaler", name, *hpa))
    return p.apply_deployment(deployment_manifest(name, replicas))


def test_get_deployment_finds_hpa_by_scale_target(platform: KubernetesPlatform) -> None:
    _deploy(platform, "llm-stable", 2, hpa=(2, 4))
    state = platform.get_deployment("llm-stable")
    assert (state.name, state.namespace, state.replicas, state.generation) == ("llm-stable", NS, 2, 1)
    assert (state.hpa_min_replicas, state.hpa_max_replicas) == (2, 4)
    assert state.image == "vllm/vllm-openai:v0.6.3"
    assert state.ready_replicas == 0


def test_scale_moves_hpa_bounds(platform: KubernetesPlatform) -> None:
    _deploy(platform, "llm-stable", 2, hpa=(2, 4))
    up = platform.scale("llm-stable", 3)
    assert (up.replicas, up.hpa_min_replicas, up.hpa_max_replicas) == (3, 3, 4)
    # What the cluster holds, read independently of the provider:
    raw = client.AutoscalingV2Api(platform.api_client).read_namespaced_horizontal_pod_autoscaler(
        "llm-stable-autoscaler", NS
    )
    assert (raw.spec.min_replicas, raw.spec.max_replicas) == (3, 4)
    scale: Any = platform.apps.read_namespaced_deployment_scale("llm-stable", NS)
    assert scale.spec.replicas == 3

    beyond = platform.scale("llm-stable", 6)  # past the HPA max: the max is raised, not the request cut
    assert (beyond.replicas, beyond.hpa_min_replicas, beyond.hpa_max_replicas) == (6, 6, 6)
    down = platform.scale("llm-stable", 0)  # minReplicas never drops below 1
    assert (down.replicas, down.hpa_min_replicas, down.hpa_max_replicas) == (0, 1, 6)


def test_scale_without_hpa(platform: KubernetesPlatform) -> None:
    _deploy(platform, "llm-canary", 1)
    state = platform.scale("llm-canary", 2)
    assert (state.replicas, state.hpa_min_replicas, state.generation) == (2, None, 2)
    assert state.hpa_max_replicas is None
    with pytest.raises(ProviderError) as info:
        platform.get_deployment("llm-nope")
    assert (info.value.error.kind, info.value.error.retryable) == ("NotFound", False)


def test_forbidden_scale_is_non_retryable_and_named(
    cluster: tuple[RbacCluster, str], platform: KubernetesPlatform
) -> None:
    _deploy(platform, "llm-blue", 1)
    cluster[0].denied.add(("patch", "deployments/scale"))
    try:
        with pytest.raises(ProviderError) as info:
            platform.scale("llm-blue", 3)
    finally:
        cluster[0].denied.clear()
    err = classify(info.value)
    assert (err.kind, err.retryable) == ("Forbidden", False)
    assert err.message.startswith(
        "Forbidden: patch deployments/scale inference/llm-blue (cluster of us-west-1): HTTP 403"
    )
    assert 'cannot patch resource "deployments/scale"' in err.message
    assert platform.get_deployment("llm-blue").replicas == 1  # nothing changed


def test_wait_rollout_follows_status(platform: KubernetesPlatform) -> None:
    state = _deploy(platform, "llm-green", 2)
    _write_status(platform, "llm-green", observedGeneration=state.generation, replicas=1, updatedReplicas=1,
                  readyReplicas=1, availableReplicas=1)  # fmt: skip
    seen: list[DeploymentState] = []
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(platform.wait_rollout, "llm-green", 20.0, seen.append)
        wait_until(lambda: seen, timeout_s=5, what="first progress report")
        assert not fut.done() and seen[0].available_replicas == 1
        _write_status(platform, "llm-green", observedGeneration=state.generation, replicas=2, updatedReplicas=2,
                      readyReplicas=2, availableReplicas=2)  # fmt: skip
        done = fut.result(timeout=10)
    assert done.rolled_out and done.available_replicas == 2


def test_wait_rollout_times_out_naming_what_is_missing(platform: KubernetesPlatform) -> None:
    state = _deploy(platform, "llm-green", 2)
    platform.scale("llm-green", 3)  # generation moves on; the "controller" has not seen it
    _write_status(platform, "llm-green", observedGeneration=state.generation, replicas=2, updatedReplicas=2,
                  readyReplicas=2, availableReplicas=2)  # fmt: skip
    timeout_s = 0.5
    started = time.monotonic()
    with pytest.raises(RolloutTimeout) as info:
        platform.wait_rollout("llm-green", timeout_s)
    # Not before its deadline, and stopped at it (a few polls past it, not a multiple of it).
    assert timeout_s <= time.monotonic() - started < 6 * timeout_s
    assert "observedGeneration 1 < generation 2" in str(info.value)
    assert "updatedReplicas 2/3" in str(info.value) and "availableReplicas 2/3" in str(info.value)
    assert info.value.state.replicas == 3
    err = classify(info.value)
    assert (err.kind, err.retryable) == ("RolloutTimeout", False)


def test_wait_rollout_stops_at_progress_deadline(platform: KubernetesPlatform) -> None:
    state = _deploy(platform, "llm-green", 2)
    cond = {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
            "message": 'ReplicaSet "llm-green-5d4f" has timed out progressing.'}  # fmt: skip
    _write_status(platform, "llm-green", observedGeneration=state.generation, replicas=2, updatedReplicas=1,
                  readyReplicas=1, availableReplicas=1, conditions=[cond])  # fmt: skip
    deadline_s = 30.0
    started = time.monotonic()
    with pytest.raises(RolloutTimeout) as info:
        platform.wait_rollout("llm-green", deadline_s)
    # The controller's verdict ends the wait, long before our own deadline would.
    assert time.monotonic() - started < deadline_s / 6
    assert "ProgressDeadlineExceeded" in str(info.value)


def test_apply_replaces_and_delete_is_idempotent(platform: KubernetesPlatform) -> None:
    first = _deploy(platform, "llm-blue", 2)
    _write_status(platform, "llm-blue", observedGeneration=1, replicas=2, updatedReplicas=2, readyReplicas=2,
                  availableReplicas=2)  # fmt: skip
    second = platform.apply_deployment(deployment_manifest("llm-blue", 2, image="vllm/vllm-openai:v0.7.0"))
    assert second.image == "vllm/vllm-openai:v0.7.0"
    assert second.generation == first.generation + 1
    assert second.available_replicas == 2  # status is the controller's, untouched by a replace
    assert not second.rolled_out  # observedGeneration lags the new spec
    svc: Any = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "llm-blue", "namespace": NS},
           "spec": {"selector": {"app": "llm"}, "ports": [{"port": 80, "targetPort": 8000}]}}  # fmt: skip
    platform.apply_service(svc)
    svc["spec"]["ports"][0]["port"] = 8080
    platform.apply_service(svc)
    stored: Any = platform.core.read_namespaced_service("llm-blue", NS)
    assert stored.spec.ports[0].port == 8080
    assert platform.delete_deployment("llm-blue") is True
    assert platform.delete_deployment("llm-blue") is False
