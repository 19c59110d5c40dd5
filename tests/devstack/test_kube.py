"""The emulated cluster through the official kubernetes client, as the product uses it."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from drctl.devstack.label_selector import parse_selector, selector_matches
from tests.support.kubeapi import NS, call, deployment, http_route, routes


async def test_discovery(api: k8s.ApiClient) -> None:
    version = await call(k8s.VersionApi(api).get_code)
    assert version.major == "1"
    groups = {g.name for g in (await call(k8s.ApisApi(api).get_api_versions)).groups}
    assert {"apps", "autoscaling", "velero.io", "gateway.networking.k8s.io"} <= groups
    resources = {r.name for r in (await call(k8s.AppsV1Api(api).get_api_resources)).resources}
    assert {"deployments", "deployments/scale", "deployments/status"} <= resources
    core = {r.name for r in (await call(k8s.CoreV1Api(api).get_api_resources)).resources}
    assert {"namespaces", "services"} <= core


async def test_deployment_lifecycle(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    created = await call(apps.create_namespaced_deployment, NS, deployment("d1", "stable"))
    meta = created.metadata
    assert (meta.generation, meta.namespace) == (1, NS)
    assert meta.uid and meta.resource_version and meta.creation_timestamp
    with pytest.raises(k8s.ApiException) as exc:
        await call(apps.create_namespaced_deployment, NS, deployment("d1", "stable"))
    assert exc.value.status == 409
    with pytest.raises(k8s.ApiException) as exc:
        await call(apps.read_namespaced_deployment, "missing", NS)
    assert exc.value.status == 404

    # Metadata-only patch: no generation bump, but a newer resourceVersion.
    labelled = await call(apps.patch_namespaced_deployment, "d1", NS, {"metadata": {"labels": {"team": "a"}}})
    assert labelled.metadata.generation == 1
    assert int(labelled.metadata.resource_version) > int(meta.resource_version)
    assert labelled.metadata.labels == {"app": "llm", "drctl.io/track": "stable", "team": "a"}

    patched = await call(apps.patch_namespaced_deployment, "d1", NS, {"spec": {"replicas": 3}})
    assert (patched.spec.replicas, patched.metadata.generation) == (3, 2)

    # The status subresource moves status only, and a replace of the main object keeps it.
    await call(
        apps.patch_namespaced_deployment_status,
        "d1",
        NS,
        {"status": {"readyReplicas": 3, "observedGeneration": 2}},
    )
    current = await call(apps.read_namespaced_deployment, "d1", NS)
    assert (current.status.ready_replicas, current.metadata.generation) == (3, 2)
    current.spec.template.spec.containers[0].image = "vllm/vllm-openai:v2"
    current.status = None
    replaced = await call(apps.replace_namespaced_deployment, "d1", NS, current)
    assert replaced.metadata.generation == 3
    assert replaced.status.ready_replicas == 3
    assert replaced.spec.template.spec.containers[0].image == "vllm/vllm-openai:v2"
    stale = await call(apps.read_namespaced_deployment, "d1", NS)
    stale.metadata.resource_version = meta.resource_version
    with pytest.raises(k8s.ApiException) as exc:
        await call(apps.replace_namespaced_deployment, "d1", NS, stale)
    assert exc.value.status == 409

    scale = await call(apps.read_namespaced_deployment_scale, "d1", NS)
    assert scale.spec.replicas == 3
    scaled = await call(apps.patch_namespaced_deployment_scale, "d1", NS, {"spec": {"replicas": 5}})
    assert scaled.spec.replicas == 5
    after = await call(apps.read_namespaced_deployment, "d1", NS)
    assert (after.spec.replicas, after.metadata.generation) == (5, 4)
    scale = await call(apps.read_namespaced_deployment_scale, "d1", NS)
    scale.spec.replicas = 1
    assert (await call(apps.replace_namespaced_deployment_scale, "d1", NS, scale)).spec.replicas == 1

    await call(apps.delete_namespaced_deployment, "d1", NS)
    with pytest.raises(k8s.ApiException) as exc:
        await call(apps.read_namespaced_deployment, "d1", NS)
    assert exc.value.status == 404


async def test_list_with_label_selectors(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    for name, track in [("sel-stable", "stable"), ("sel-canary", "canary"), ("sel-blue", "blue")]:
        await call(apps.create_namespaced_deployment, "sel", deployment(name, track))

    async def names(selector: str) -> list[str]:
        items = (await call(apps.list_namespaced_deployment, "sel", label_selector=selector)).items
        return sorted(d.metadata.name for d in items)

    assert await names("drctl.io/track=canary") == ["sel-canary"]
    assert await names("drctl.io/track!=canary") == ["sel-blue", "sel-stable"]
    assert await names("app=llm,drctl.io/track in (stable, blue)") == ["sel-blue", "sel-stable"]
    assert await names("drctl.io/track notin (stable)") == ["sel-blue", "sel-canary"]
    assert await names("drctl.io/track") == ["sel-blue", "sel-canary", "sel-stable"]
    assert await names("!drctl.io/track") == []
    everywhere = await call(apps.list_deployment_for_all_namespaces, label_selector="drctl.io/track=blue")
    assert [d.metadata.name for d in everywhere.items] == ["sel-blue"]


async def test_core_hpa_and_custom_objects(api: k8s.ApiClient) -> None:
    core, hpa, custom = k8s.CoreV1Api(api), k8s.AutoscalingV2Api(api), k8s.CustomObjectsApi(api)
    await call(core.create_namespace, {"metadata": {"name": "velero"}})
    assert "velero" in [n.metadata.name for n in (await call(core.list_namespace)).items]
    svc = await call(
        core.create_namespaced_service,
        NS,
        {"metadata": {"name": "llm-stable"}, "spec": {"ports": [{"port": 80}]}},
    )
    assert svc.spec.ports[0].port == 80
    scratch = await call(
        core.create_namespaced_service,
        NS,
        {"metadata": {"name": "scratch"}, "spec": {"ports": [{"port": 81}]}},
    )
    deleted = await call(core.delete_namespaced_service, "scratch", NS)  # the client expects a V1Service
    assert deleted.metadata.name == "scratch" and deleted.metadata.uid == scratch.metadata.uid

    body = {
        "metadata": {"name": "llm-stable"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm-stable"},
            "minReplicas": 2,
            "maxReplicas": 8,
        },
    }
    await call(hpa.create_namespaced_horizontal_pod_autoscaler, NS, body)
    raised = await call(
        hpa.patch_namespaced_horizontal_pod_autoscaler, "llm-stable", NS, {"spec": {"minReplicas": 4}}
    )
    assert (raised.spec.min_replicas, raised.metadata.generation) == (4, 2)

    backup = {
        "apiVersion": "velero.io/v1",
        "kind": "Backup",
        "metadata": {"name": "b1", "labels": {"drctl.io/fleet": "t"}},
        "spec": {"includedNamespaces": [NS]},
    }
    args = ("velero.io", "v1", "velero", "backups")
    created = await call(custom.create_namespaced_custom_object, *args, backup)
    assert created["metadata"]["generation"] == 1
    listed = await call(custom.list_namespaced_custom_object, *args, label_selector="drctl.io/fleet=t")
    assert [b["metadata"]["name"] for b in listed["items"]] == ["b1"]
    # Velero's Backup CRD has no status subresource: status is written through the object itself.
    done = await call(
        custom.patch_namespaced_custom_object,
        *args,
        "b1",
        {"status": {"phase": "Completed"}},
        _content_type="application/merge-patch+json",
    )
    assert done["status"]["phase"] == "Completed"
    await call(custom.delete_namespaced_custom_object, *args, "b1")
    with pytest.raises(k8s.ApiException) as exc:
        await call(custom.get_namespaced_custom_object, *args, "b1")
    assert exc.value.status == 404

    route = http_route("llm", [{"name": "llm-stable", "port": 80, "weight": 100}])
    rargs = routes(NS)
    await call(custom.create_namespaced_custom_object, *rargs, route)
    route["spec"]["rules"][0]["backendRefs"].append({"name": "llm-canary", "port": 80, "weight": 5})
    current = await call(custom.get_namespaced_custom_object, *rargs, "llm")
    current["spec"] = route["spec"]
    replaced = await call(custom.replace_namespaced_custom_object, *rargs, "llm", current)
    assert [r["weight"] for r in replaced["spec"]["rules"][0]["backendRefs"]] == [100, 5]
    assert replaced["metadata"]["generation"] == 2


def test_selector_parsing() -> None:
    reqs = parse_selector("a=1, b != 2,c in (x,y),!d,e")
    assert selector_matches(reqs, {"a": "1", "c": "y", "e": ""})
    assert not selector_matches(reqs, {"a": "1", "b": "2", "c": "y", "e": ""})
    assert not selector_matches(reqs, {"a": "1", "c": "y", "d": "", "e": ""})


async def test_pod_deletion_is_graceful_only_for_a_pod_a_node_runs(api: k8s.ApiClient) -> None:
    """As the API server's pod strategy: a bound, running pod is marked terminating (its kubelet
    stops it and deletes it with grace 0); an unbound one, or a DELETE with grace 0, goes at once."""
    core = k8s.CoreV1Api(api)
    containers = [{"name": "server", "image": "vllm/vllm-openai:v1"}]
    bound = {"metadata": {"name": "bound"}, "spec": {"nodeName": "node-a", "containers": containers,
                                                     "terminationGracePeriodSeconds": 45}}  # fmt: skip
    await call(core.create_namespaced_pod, NS, bound)
    first = await call(core.delete_namespaced_pod, "bound", NS)
    assert (
        first.metadata.deletion_timestamp is not None and first.metadata.deletion_grace_period_seconds == 45
    )
    status = {"status": {"phase": "Running"}}
    await call(
        core.patch_namespaced_pod_status, "bound", NS, status, _content_type="application/merge-patch+json"
    )
    kept = await call(core.read_namespaced_pod, "bound", NS)  # a status write does not end it early
    assert kept.metadata.deletion_timestamp == first.metadata.deletion_timestamp
    await call(core.delete_namespaced_pod, "bound", NS, grace_period_seconds=0)
    with pytest.raises(k8s.ApiException) as exc:
        await call(core.read_namespaced_pod, "bound", NS)
    assert exc.value.status == 404

    await call(
        core.create_namespaced_pod, NS, {"metadata": {"name": "loose"}, "spec": {"containers": containers}}
    )
    gone = await call(core.delete_namespaced_pod, "loose", NS)
    assert gone.metadata.deletion_timestamp is None
    assert [
        p.metadata.name
        for p in (await call(core.list_namespaced_pod, NS)).items
        if p.metadata.name == "loose"
    ] == []
