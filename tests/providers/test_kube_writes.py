"""drctl's writes against the strict emulated API server: copies drop what the server allocated, a
read-modify-write that meets 409 reads again within a bound, and unknown fields are refused."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from drctl.models.upgrade import Release
from drctl.providers.errors import ProviderError
from drctl.providers.kube_objects import CONFLICT_ATTEMPTS, MERGE, as_copy
from drctl.providers.kubernetes import KubernetesPlatform
from drctl.providers.workload import Workload, candidate_service
from tests.support.config import fleet_config_data
from tests.support.kube_cluster import NS, deployment_manifest


class RacedPlatform(KubernetesPlatform):
    """After each of its first `races` reads, another writer (a controller) changes the object."""

    races = 0

    def _read(self, name: str) -> Any:
        dep = super()._read(name)
        if self.races > 0:
            self.races -= 1
            self.apps.patch_namespaced_deployment_status(
                name, NS, {"status": {"observedGeneration": self.races}}, _content_type=MERGE
            )
        return dep


def _raced(platform: KubernetesPlatform, races: int) -> RacedPlatform:
    raced = RacedPlatform.__new__(RacedPlatform)
    raced.__dict__.update(platform.__dict__)
    raced.races = races
    return raced


def test_replace_that_meets_409_reads_again(platform: KubernetesPlatform) -> None:
    platform.delete_deployment("llm-race")
    platform.apply_deployment(deployment_manifest("llm-race", 2))
    raced = _raced(platform, CONFLICT_ATTEMPTS - 1)
    state = raced.apply_deployment(deployment_manifest("llm-race", 4))
    assert state.replicas == 4 and raced.races == 0


def test_replace_gives_up_after_the_bound(platform: KubernetesPlatform) -> None:
    platform.delete_deployment("llm-race2")
    platform.apply_deployment(deployment_manifest("llm-race2", 2))
    raced = _raced(platform, CONFLICT_ATTEMPTS)
    with pytest.raises(ProviderError) as exc:
        raced.apply_deployment(deployment_manifest("llm-race2", 4))
    assert exc.value.error.kind == "Conflict" and "replace deployments" in str(exc.value)
    assert platform.get_deployment("llm-race2").replicas == 2


def test_copy_of_a_nodeport_service_is_accepted(platform: KubernetesPlatform) -> None:
    svc = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "llm-np-stable", "labels": {"app": "llm"}},
        "spec": {"type": "NodePort", "selector": {"app": "llm"}, "ports": [{"port": 80, "targetPort": 8000}]},
    }
    platform.apply_service(svc)
    stable = platform.api_client.sanitize_for_serialization(
        platform.core.read_namespaced_service("llm-np-stable", NS)
    )
    assert stable["spec"]["ports"][0]["nodePort"] and stable["spec"]["clusterIP"]
    # Sent back verbatim, the allocated clusterIP and nodePort are refused: the server says 422.
    verbatim = {**stable, "metadata": {"name": "llm-np-verbatim"}}
    with pytest.raises(ApiException) as exc:
        platform.core.create_namespaced_service(NS, verbatim)
    assert exc.value.status == 422
    canary = candidate_service(stable, "llm-np-canary", "canary")
    assert "nodePort" not in canary["spec"]["ports"][0] and "clusterIP" not in canary["spec"]
    platform.apply_service(canary)
    created: Any = platform.core.read_namespaced_service("llm-np-canary", NS)
    assert created.spec.ports[0].node_port != stable["spec"]["ports"][0]["nodePort"]
    # Applying it again replaces it and keeps the server's allocations.
    platform.apply_service(canary)
    again: Any = platform.core.read_namespaced_service("llm-np-canary", NS)
    assert (again.spec.cluster_ip, again.spec.ports[0].node_port) == (
        created.spec.cluster_ip,
        created.spec.ports[0].node_port,
    )


def test_as_copy_drops_server_fields() -> None:
    obj = {
        "kind": "Deployment",
        "metadata": {"name": "x", "uid": "u", "resourceVersion": "7", "generation": 3, "managedFields": []},
        "spec": {"replicas": 1},
        "status": {"replicas": 1},
    }
    assert as_copy(obj) == {"kind": "Deployment", "metadata": {"name": "x"}, "spec": {"replicas": 1}}


def test_track_copy_of_a_read_deployment_is_created(platform: KubernetesPlatform) -> None:
    """A green track made from the stable Deployment as read (status, uid, resourceVersion and all)."""
    from drctl.config.schema import FleetConfig

    data = fleet_config_data()
    cfg = FleetConfig.model_validate(data)
    platform.delete_deployment(cfg.workload.deployment_name("green"))
    platform.apply_deployment(deployment_manifest(cfg.workload.deployment_name("stable"), 2))
    platform.apps.patch_namespaced_deployment_status(
        cfg.workload.deployment_name("stable"), NS, {"status": {"replicas": 2}}, _content_type=MERGE
    )
    Workload(cfg, platform).deploy_track("green", Release(image="vllm/vllm-openai:v2"), 1)
    green: Any = client.AppsV1Api(platform.api_client).read_namespaced_deployment(
        cfg.workload.deployment_name("green"), NS
    )
    assert (green.metadata.generation, green.status, green.spec.replicas) == (1, None, 1)
    assert green.spec.template.spec.containers[0].image == "vllm/vllm-openai:v2"
