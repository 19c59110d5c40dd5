"""The emulated API server refuses what a real one refuses: each rule has a request that it must refuse.

Real server behaviour named per test: the apiserver's patch handler (endpoints/handlers/patch.go),
strict field validation, optimistic concurrency, status subresources, Service allocation, selectors.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import httpx
import pytest
from kubernetes import client as k8s
from kubernetes import watch

from tests.support.kubeapi import call, deployment, http_route, routes

NS = "strict"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
GROUP, VERSION = "velero.io", "v1"


def _status(exc: pytest.ExceptionInfo[k8s.ApiException]) -> tuple[int, str, str]:
    body = json.loads(exc.value.body)
    return exc.value.status, body["reason"], body["message"]


async def _refused(fn: Any, *args: Any, **kwargs: Any) -> tuple[int, str, str]:
    with pytest.raises(k8s.ApiException) as exc:
        await call(fn, *args, **kwargs)
    return _status(exc)


async def _raw(
    api: k8s.ApiClient, method: str, path: str, body: Any, ctype: str = "application/json", **params: str
) -> httpx.Response:
    """A request the typed client would refuse to send (its models reject unknown fields and bad types)."""
    async with httpx.AsyncClient(base_url=api.configuration.host, timeout=5) as http:
        return await http.request(
            method, path, content=json.dumps(body).encode(), headers={"Content-Type": ctype}, params=params
        )


def _two_containers(name: str) -> dict[str, Any]:
    dep = deployment(name, "stable")
    dep["spec"]["template"]["spec"]["containers"] = [
        {"name": "server", "image": "v1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
        {"name": "sidecar", "image": "s1", "ports": [{"containerPort": 9000}]},
    ]
    return dep


# --- PATCH by Content-Type -------------------------------------------------------------------------


async def test_json_patch_must_be_an_array(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    await call(apps.create_namespaced_deployment, NS, deployment("jp", "stable"))
    # The client itself turns a dict sent as a JSON patch into a strategic merge; a raw one must fail.
    url = f"/apis/apps/v1/namespaces/{NS}/deployments/jp"
    refused = await _raw(api, "PATCH", url, {"spec": {"replicas": 3}}, JSON_PATCH)
    assert (refused.status_code, refused.json()["reason"]) == (400, "BadRequest")
    ops = [{"op": "replace", "path": "/spec/replicas", "value": 4}]
    done = await call(apps.patch_namespaced_deployment, "jp", NS, ops, _content_type=JSON_PATCH)
    assert done.spec.replicas == 4
    code, _, _ = await _refused(
        apps.patch_namespaced_deployment,
        "jp",
        NS,
        [{"op": "test", "path": "/spec/replicas", "value": 9}],
        _content_type=JSON_PATCH,
    )
    assert code == 422


async def test_patch_without_or_with_unknown_content_type_is_415(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    await call(apps.create_namespaced_deployment, NS, deployment("ct", "stable"))
    url = f"{api.configuration.host}/apis/apps/v1/namespaces/{NS}/deployments/ct"
    async with httpx.AsyncClient(timeout=5) as http:
        bare = await http.patch(url, content=b'{"spec": {"replicas": 3}}')
        assert bare.status_code == 415
        plain = await http.patch(
            url, content=b'{"spec": {"replicas": 3}}', headers={"Content-Type": "application/json"}
        )
        assert plain.status_code == 415 and plain.json()["reason"] == "UnsupportedMediaType"
    assert (await call(apps.read_namespaced_deployment, "ct", NS)).spec.replicas == 2
    # Cluster-scoped Namespaces take their patch type from the header too.
    core = k8s.CoreV1Api(api)
    await call(core.create_namespace, {"metadata": {"name": "strict-ns"}})
    labelled = await call(
        core.patch_namespace, "strict-ns", {"metadata": {"labels": {"a": "b"}}}, _content_type=MERGE
    )
    assert labelled.metadata.labels == {"a": "b"}
    refused = await _raw(api, "PATCH", "/api/v1/namespaces/strict-ns", {"metadata": {}}, "text/plain")
    assert refused.status_code == 415


async def test_merge_patch_replaces_lists_and_strategic_merges_by_key(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    await call(apps.create_namespaced_deployment, NS, _two_containers("sm"))
    change = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "server", "image": "v2", "env": [{"name": "B", "value": "3"}]},
                        {"name": "sidecar", "ports": [{"containerPort": 9100}]},
                    ]
                }
            }
        }
    }
    merged = await call(apps.patch_namespaced_deployment, "sm", NS, change, _content_type=STRATEGIC)
    server, sidecar = merged.spec.template.spec.containers
    assert (server.image, [(e.name, e.value) for e in server.env]) == ("v2", [("A", "1"), ("B", "3")])
    assert (sidecar.image, [p.container_port for p in sidecar.ports]) == ("s1", [9000, 9100])

    only = {"spec": {"template": {"spec": {"containers": [{"name": "server", "image": "v3"}]}}}}
    replaced = await call(apps.patch_namespaced_deployment, "sm", NS, only, _content_type=MERGE)
    assert [(c.name, c.image, c.env) for c in replaced.spec.template.spec.containers] == [
        ("server", "v3", None)
    ]


async def test_strategic_merge_on_a_custom_resource_is_415(api: k8s.ApiClient) -> None:
    custom = k8s.CustomObjectsApi(api)
    args = (GROUP, VERSION, NS, "backups")
    body = {"apiVersion": "velero.io/v1", "kind": "Backup", "metadata": {"name": "b"}, "spec": {}}
    await call(custom.create_namespaced_custom_object, *args, body)
    code, reason, _ = await _refused(
        custom.patch_namespaced_custom_object,
        *args,
        "b",
        {"spec": {"ttl": "1h0m0s"}},
        _content_type=STRATEGIC,
    )
    assert (code, reason) == (415, "UnsupportedMediaType")
    done = await call(custom.patch_namespaced_custom_object, *args, "b", {"spec": {"ttl": "1h0m0s"}})
    assert done["spec"]["ttl"] == "1h0m0s"  # the client's default for custom objects is a merge patch


# --- schema validation -----------------------------------------------------------------------------


async def test_unknown_field_strict_refused_warn_accepted(api: k8s.ApiClient) -> None:
    body = {"metadata": {"name": "uf"}, "data": {"a": "1"}, "spec": {"x": 1}}
    url = f"/api/v1/namespaces/{NS}/configmaps"
    refused = await _raw(api, "POST", url, body, fieldValidation="Strict")
    assert refused.status_code == 400
    assert refused.json()["message"] == 'strict decoding error: unknown field "spec"'
    dep = deployment("uf", "stable")
    dep["spec"]["template"]["spec"]["containers"][0]["imagePolicy"] = "x"
    refused = await _raw(
        api, "POST", f"/apis/apps/v1/namespaces/{NS}/deployments", dep, fieldValidation="Strict"
    )
    assert 'unknown field "spec.template.spec.containers[0].imagePolicy"' in refused.json()["message"]
    warned = await _raw(api, "POST", url, body)  # the default is fieldValidation=Warn
    assert warned.status_code == 201
    assert warned.headers["Warning"] == '299 - "unknown field \\"spec\\""'


async def test_schema_types_and_required_fields(api: k8s.ApiClient) -> None:
    custom = k8s.CustomObjectsApi(api)
    url = f"/apis/apps/v1/namespaces/{NS}/deployments"
    dep = deployment("ty", "stable")
    dep["spec"]["replicas"] = "three"
    refused = await _raw(api, "POST", url, dep)
    assert (refused.status_code, refused.json()["reason"]) == (422, "Invalid")
    assert "spec.replicas" in refused.json()["message"]
    dep = deployment("ty", "stable")
    del dep["spec"]["template"]["spec"]["containers"][0]["name"]
    refused = await _raw(api, "POST", url, dep)
    assert refused.status_code == 422 and "'name' is a required property" in refused.json()["message"]
    # Velero's CRD says ttl is a string (a Go duration), so a number is refused.
    bad = {"apiVersion": "velero.io/v1", "kind": "Backup", "metadata": {"name": "bt"}, "spec": {"ttl": 3600}}
    code, _, message = await _refused(
        custom.create_namespaced_custom_object, GROUP, VERSION, NS, "backups", bad
    )
    assert code == 422 and "spec.ttl" in message
    route = http_route("r", [{"name": "s", "weight": 5, "wieght": 1}])
    code, _, message = await _refused(
        custom.create_namespaced_custom_object, *routes(NS), route, field_validation="Strict"
    )
    assert message == 'strict decoding error: unknown field "spec.rules[0].backendRefs[0].wieght"'


# --- resourceVersion, generation, status --------------------------------------------------------


async def test_stale_resource_version_is_409_on_put_and_patch(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    first = await call(apps.create_namespaced_deployment, NS, deployment("rv", "stable"))
    old = first.metadata.resource_version
    moved = await call(
        apps.patch_namespaced_deployment, "rv", NS, {"spec": {"replicas": 3}}, _content_type=MERGE
    )
    assert int(moved.metadata.resource_version) > int(old)
    stale = {"metadata": {"resourceVersion": old}, "spec": {"replicas": 4}}
    code, reason, message = await _refused(
        apps.patch_namespaced_deployment, "rv", NS, stale, _content_type=MERGE
    )
    assert (code, reason) == (409, "Conflict")
    assert message == (
        'Operation cannot be fulfilled on deployments.apps "rv": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    body = api.sanitize_for_serialization(moved)
    body["metadata"]["resourceVersion"] = old
    assert (await _refused(apps.replace_namespaced_deployment, "rv", NS, body))[0] == 409
    assert (await call(apps.read_namespaced_deployment, "rv", NS)).spec.replicas == 3


async def test_generation_status_subresource_and_observed_generation_lag(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    created = await call(
        apps.create_namespaced_deployment, NS, {**deployment("gen", "stable"), "status": {"replicas": 9}}
    )
    assert created.metadata.generation == 1 and created.status is None  # create sets no status
    await call(
        apps.patch_namespaced_deployment_status,
        "gen",
        NS,
        {"status": {"observedGeneration": 1, "replicas": 2}, "spec": {"replicas": 7}},
        _content_type=MERGE,
    )
    current = await call(apps.read_namespaced_deployment, "gen", NS)
    assert (current.spec.replicas, current.status.observed_generation) == (2, 1)  # /status ignores spec
    annotated = await call(
        apps.patch_namespaced_deployment,
        "gen",
        NS,
        {"metadata": {"annotations": {"a": "b"}}},
        _content_type=MERGE,
    )
    assert annotated.metadata.generation == 1
    body = api.sanitize_for_serialization(annotated)
    body["spec"]["replicas"], body["status"] = 5, {"observedGeneration": 99, "replicas": 0}
    replaced = await call(apps.replace_namespaced_deployment, "gen", NS, body)
    # The main resource ignores status; the spec change bumps generation, which the controller has
    # not observed yet.
    assert (replaced.metadata.generation, replaced.status.observed_generation) == (2, 1)
    assert replaced.status.replicas == 2
    code, _, message = await _refused(
        apps.create_namespaced_deployment, NS, {**body, "metadata": {"name": "gen2", "resourceVersion": "1"}}
    )
    assert code == 500 and "resourceVersion should not be set on objects to be created" in message
    unchanged = await call(
        apps.replace_namespaced_deployment, "gen", NS, api.sanitize_for_serialization(replaced)
    )
    assert unchanged.metadata.resource_version == replaced.metadata.resource_version  # a no-op write
    # Velero's Backup CRD has no status subresource: /status does not exist for it.
    code, _, _ = await _refused(
        k8s.CustomObjectsApi(api).patch_namespaced_custom_object_status,
        GROUP,
        VERSION,
        NS,
        "backups",
        "b",
        {"status": {"phase": "Completed"}},
    )
    assert code == 404


# --- Services ----------------------------------------------------------------------------------


def _svc(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"ports": [{"port": 80}], **spec}}


async def test_service_allocation_and_conflicts(api: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(api)
    a = await call(core.create_namespaced_service, NS, _svc("a", type="NodePort"))
    assert a.spec.cluster_ip and a.spec.cluster_ips == [a.spec.cluster_ip]
    assert 30000 <= a.spec.ports[0].node_port <= 32767
    b = await call(core.create_namespaced_service, NS, _svc("b"))
    assert b.spec.cluster_ip != a.spec.cluster_ip and b.spec.ports[0].node_port is None

    taken = _svc("c", type="NodePort")
    taken["spec"]["ports"][0]["nodePort"] = a.spec.ports[0].node_port
    code, reason, message = await _refused(core.create_namespaced_service, NS, taken)
    assert (code, reason) == (422, "Invalid") and "provided port is already allocated" in message
    code, _, message = await _refused(
        core.create_namespaced_service, NS, _svc("d", clusterIP=a.spec.cluster_ip)
    )
    assert code == 422 and "provided IP is already allocated" in message

    # A replace that leaves them out keeps the allocated values; one that changes clusterIP is refused.
    body = api.sanitize_for_serialization(a)
    spec = body["spec"]
    for field in ("clusterIP", "clusterIPs"):
        spec.pop(field)
    spec["ports"][0].pop("nodePort")
    kept = await call(core.replace_namespaced_service, "a", NS, body)
    assert (kept.spec.cluster_ip, kept.spec.ports[0].node_port) == (
        a.spec.cluster_ip,
        a.spec.ports[0].node_port,
    )
    moved = api.sanitize_for_serialization(kept)
    moved["spec"]["clusterIP"] = moved["spec"]["clusterIPs"][0] = b.spec.cluster_ip
    assert (await _refused(core.replace_namespaced_service, "a", NS, moved))[0] == 422
    # Freed on delete: the port can be had again.
    await call(core.delete_namespaced_service, "a", NS)
    again = await call(core.create_namespaced_service, NS, copy.deepcopy(taken))
    assert again.spec.ports[0].node_port == a.spec.ports[0].node_port


# --- selectors ----------------------------------------------------------------------------------


async def test_label_and_field_selectors_on_list_and_watch(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    ns = "strict-sel"
    for name, track in [("s-stable", "stable"), ("s-canary", "canary"), ("s-blue", "blue")]:
        await call(apps.create_namespaced_deployment, ns, deployment(name, track))

    async def names(**kw: str) -> list[str]:
        return sorted(d.metadata.name for d in (await call(apps.list_namespaced_deployment, ns, **kw)).items)

    assert await names(label_selector="drctl.io/track in (stable,canary)") == ["s-canary", "s-stable"]
    assert await names(label_selector="drctl.io/track notin (stable),app=llm") == ["s-blue", "s-canary"]
    assert await names(field_selector="metadata.name=s-blue") == ["s-blue"]
    assert await names(field_selector="metadata.name!=s-blue,metadata.namespace=strict-sel") == [
        "s-canary",
        "s-stable",
    ]
    code, _, message = await _refused(
        apps.list_namespaced_deployment, ns, field_selector="status.phase=Running"
    )
    assert code == 400 and "field label not supported" in message

    listed = await call(apps.list_namespaced_deployment, ns, label_selector="drctl.io/track=canary")

    def events() -> list[tuple[str, str]]:
        w = watch.Watch()
        stream = w.stream(
            apps.list_namespaced_deployment,
            ns,
            label_selector="drctl.io/track=canary",
            resource_version=listed.metadata.resource_version,
            timeout_seconds=2,
            _request_timeout=5,
        )
        return [(e["type"], e["object"].metadata.name) for e in stream]

    watching = asyncio.create_task(call(events))
    await asyncio.sleep(0.5)  # the watch is open before the writes it must see
    await call(
        apps.patch_namespaced_deployment, "s-stable", ns, {"spec": {"replicas": 5}}, _content_type=MERGE
    )
    relabel = {"metadata": {"labels": {"drctl.io/track": "stable"}}}
    await call(
        apps.patch_namespaced_deployment, "s-canary", ns, {"spec": {"replicas": 3}}, _content_type=MERGE
    )
    await call(apps.patch_namespaced_deployment, "s-canary", ns, relabel, _content_type=MERGE)
    # The stable one never matched; the canary's change is seen, then it leaves the selector (DELETED).
    assert await watching == [("MODIFIED", "s-canary"), ("DELETED", "s-canary")]
