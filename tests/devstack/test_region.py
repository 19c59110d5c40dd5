"""A real region process: replicas behind its gateway, restarts, faults and scaling."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client as k8s

from drctl.devstack.haproxy_conf import READY_PATH, region_socket, state_file
from drctl.providers.haproxy_runtime import HAProxyError, HAProxyRuntime
from tests.support.config import short_tmp_dir, write_fleet_config
from tests.support.regionproc import RegionProcess, alive
from tests.support.wait import wait_until

REGION, DEPLOYMENT = "us-west-1", "llm-stable"


@pytest.fixture(scope="module")
def region() -> Iterator[RegionProcess]:
    directory = short_tmp_dir()
    try:
        with RegionProcess(write_fleet_config(directory), REGION) as rp:
            yield rp
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def apps(region: RegionProcess) -> Iterator[k8s.AppsV1Api]:
    cfg = k8s.Configuration()
    cfg.host = region.region_cfg.kube.api_url
    with k8s.ApiClient(cfg) as api:
        yield k8s.AppsV1Api(api)


@pytest.fixture
def ns(region: RegionProcess) -> str:
    return region.region_cfg.kube.namespace


@pytest.fixture(autouse=True)
def back_to_steady_state(region: RegionProcess, apps: k8s.AppsV1Api, ns: str) -> Iterator[None]:
    yield
    region.admin.post("/faults/clear").raise_for_status()
    apps.patch_namespaced_deployment_scale(DEPLOYMENT, ns, {"spec": {"replicas": 2}})
    wait_until(
        lambda: ready(apps, ns) == 2 and len(running(region)) == 2, timeout_s=20, what="2 ready replicas"
    )


def ready(apps: k8s.AppsV1Api, ns: str) -> int:
    return apps.read_namespaced_deployment_status(DEPLOYMENT, ns).status.ready_replicas or 0


def running(region: RegionProcess) -> list[dict]:
    return [r for r in region.admin.get("/replicas").json() if r["state"] == "running"]


def pods(apps: k8s.AppsV1Api, ns: str, deployment: str = DEPLOYMENT) -> list[k8s.V1Pod]:
    """The Deployment's Pods (`<deployment>-<hash>-<x>`) as the API lists them, not terminating ones."""
    found = k8s.CoreV1Api(apps.api_client).list_namespaced_pod(ns).items
    mine = (
        p for p in found if p.metadata.name.startswith(f"{deployment}-") and not p.metadata.deletion_timestamp
    )
    return sorted(mine, key=lambda p: p.metadata.name)


def pod_names(apps: k8s.AppsV1Api, ns: str, deployment: str = DEPLOYMENT) -> list[str]:
    return [p.metadata.name for p in pods(apps, ns, deployment)]


def test_two_replicas_serve_through_the_gateway(region: RegionProcess, apps: k8s.AppsV1Api, ns: str) -> None:
    dep = apps.read_namespaced_deployment(DEPLOYMENT, ns)
    assert dep.status.observed_generation == dep.metadata.generation
    assert (dep.status.ready_replicas, dep.status.updated_replicas) == (2, 2)
    conditions = {c.type: (c.status, c.reason) for c in dep.status.conditions}
    assert conditions["Available"] == ("True", "MinimumReplicasAvailable")
    assert conditions["Progressing"] == ("True", "NewReplicaSetAvailable")

    served_by = set()
    for _ in range(8):
        resp = region.gateway.post(
            "/v1/completions", json={"model": "fleetsim-tiny", "prompt": "hi", "max_tokens": 2}
        )
        assert resp.status_code == 200
        assert resp.headers["X-Fleetsim-Region"] == REGION
        assert resp.headers["X-Fleetsim-Version"] == "v0.6.3"
        served_by.add(resp.headers["X-Fleetsim-Replica"])
    assert served_by == set(pod_names(apps, ns))
    state = json.loads((region.cfg.state_dir() / f"replicas-{REGION}.json").read_text())
    assert sorted(r["pod"] for r in state["replicas"]) == sorted(served_by)


def test_sigkilled_replica_is_replaced(region: RegionProcess, apps: k8s.AppsV1Api, ns: str) -> None:
    victim = running(region)[0]
    before = {p.metadata.name: p for p in pods(apps, ns)}[victim["pod"]]
    os.kill(victim["pid"], signal.SIGKILL)
    wait_until(lambda: ready(apps, ns) < 2, timeout_s=10, what="the kill to be noticed")

    def replaced() -> bool:
        live = {r["pod"]: r for r in running(region)}
        return len(live) == 2 and live[victim["pod"]]["pid"] != victim["pid"] and ready(apps, ns) == 2

    wait_until(replaced, timeout_s=20, what="a new process for the killed pod and readyReplicas back to 2")
    # The kubelet restarts a dead container in its pod: same Pod object, one restart more.
    after = {p.metadata.name: p for p in pods(apps, ns)}[victim["pod"]]
    assert after.metadata.uid == before.metadata.uid
    restarts = after.status.container_statuses[0].restart_count
    assert restarts == before.status.container_statuses[0].restart_count + 1


def test_stay_down_kill_keeps_the_replica_down(region: RegionProcess, apps: k8s.AppsV1Api, ns: str) -> None:
    resp = region.admin.post(
        "/faults/replicas", json={"action": "kill", "track": "stable", "count": 1, "stay_down": True}
    )
    (pod,) = resp.json()["affected"]
    status_file = region.cfg.state_dir() / f"replicas-{REGION}.json"

    def settled() -> bool:
        # Status and the state file come from the same reconcile pass that decided not to restart.
        status = apps.read_namespaced_deployment_status(DEPLOYMENT, ns).status
        states = {r["pod"]: r["state"] for r in json.loads(status_file.read_text())["replicas"]}
        return status.ready_replicas == 1 and status.replicas == 1 and states.get(pod) == "killed"

    wait_until(settled, timeout_s=10, what="the killed replica to stay down")
    assert {r["pod"]: r["state"] for r in region.admin.get("/replicas").json()}[pod] == "killed"
    assert region.admin.get("/faults").json()["replicas"] == [
        {"pod": pod, "track": "stable", "state": "killed", "stay_down": True}
    ]
    assert region.gateway.get("/health").status_code == 200  # the other replica still serves

    region.admin.post("/faults/clear").raise_for_status()
    wait_until(lambda: ready(apps, ns) == 2, timeout_s=20, what="restart after clear")


def test_gateway_kill_and_restore(region: RegionProcess) -> None:
    assert region.admin.post("/faults/gateway", json={"action": "kill"}).json() == {"gateway": "killed"}
    with pytest.raises(httpx.ConnectError):
        region.gateway.get("/health")
    assert region.admin.get("/faults").json()["gateway"] == "killed"

    region.admin.post("/faults/gateway", json={"action": "restore"}).raise_for_status()

    def serving() -> bool:
        try:
            resp = region.gateway.get("/v1/models")
        except httpx.HTTPError:
            return False
        return resp.status_code == 200 and resp.headers.get("X-Fleetsim-Region") == REGION

    wait_until(serving, timeout_s=15, what="the gateway to serve again")
    assert region.admin.get("/faults").json()["gateway"] is None


def test_scale_to_three(region: RegionProcess, apps: k8s.AppsV1Api, ns: str) -> None:
    apps.patch_namespaced_deployment_scale(DEPLOYMENT, ns, {"spec": {"replicas": 3}})
    wait_until(lambda: ready(apps, ns) == 3, timeout_s=20, what="3 ready replicas")
    runtime = HAProxyRuntime(region_socket(region.cfg, region.region_cfg))

    def three_servers() -> list[str]:
        servers = [s.name for s in runtime.servers("track_stable") if s.operational]
        return sorted(servers) if len(servers) == 3 else []

    assert wait_until(three_servers, timeout_s=10, what="3 servers in track_stable") == pod_names(apps, ns)
    assert apps.read_namespaced_deployment(DEPLOYMENT, ns).status.replicas == 3


def test_template_change_rolls_replicas_without_errors(
    region: RegionProcess, apps: k8s.AppsV1Api, ns: str
) -> None:
    dep = apps.read_namespaced_deployment(DEPLOYMENT, ns)
    dep.spec.template.spec.containers[0].image = "vllm/vllm-openai:v0.7.0"
    apps.replace_namespaced_deployment(DEPLOYMENT, ns, dep)
    codes: list[int] = []

    def rolled() -> bool:
        # A new connection per poll, as a user's request would open: a reused idle one can meet
        # HAProxy closing it at its keep-alive timeout, which says nothing about the rollout.
        codes.append(region.gateway.get("/v1/models", headers={"Connection": "close"}).status_code)
        s = apps.read_namespaced_deployment_status(DEPLOYMENT, ns).status
        return (s.updated_replicas, s.ready_replicas, s.replicas) == (
            2,
            2,
            2,
        ) and s.observed_generation == dep.metadata.generation + 1

    wait_until(rolled, timeout_s=30, interval_s=0.05, what="the rollout to finish")
    assert set(codes) == {200}
    versions = {region.gateway.get("/v1/models").headers["X-Fleetsim-Version"] for _ in range(6)}
    assert versions == {"v0.7.0"}


def test_hpa_min_replicas_raises_the_deployment(region: RegionProcess, apps: k8s.AppsV1Api, ns: str) -> None:
    hpa = k8s.AutoscalingV2Api(apps.api_client)
    hpa.patch_namespaced_horizontal_pod_autoscaler(DEPLOYMENT, ns, {"spec": {"minReplicas": 3}})
    try:
        wait_until(
            lambda: apps.read_namespaced_deployment(DEPLOYMENT, ns).spec.replicas == 3,
            timeout_s=10,
            what="the HPA to raise spec.replicas",
        )
        wait_until(lambda: ready(apps, ns) == 3, timeout_s=20, what="3 ready replicas")
        assert hpa.read_namespaced_horizontal_pod_autoscaler(DEPLOYMENT, ns).status.desired_replicas == 3
    finally:
        hpa.patch_namespaced_horizontal_pod_autoscaler(DEPLOYMENT, ns, {"spec": {"minReplicas": 2}})


def test_inference_fault_fans_out_and_clears(region: RegionProcess) -> None:
    resp = region.admin.post("/faults/inference", json={"track": "stable", "error_rate": 1.0})
    assert resp.json()["affected"] == sorted(r["pod"] for r in running(region))
    body = {"model": "fleetsim-tiny", "prompt": "hi", "max_tokens": 1}
    assert region.gateway.post("/v1/completions", json=body).status_code == 500
    assert region.admin.get("/faults").json()["inference"] == {"stable": {"error_rate": 1.0}}
    assert region.admin.post("/faults/inference", json={"error_rate": 2}).status_code == 400
    region.admin.post("/faults/clear").raise_for_status()
    assert region.gateway.post("/v1/completions", json=body).status_code == 200


def test_canary_deployment_joins_its_track_and_leaves_on_delete(
    region: RegionProcess, apps: k8s.AppsV1Api, ns: str
) -> None:
    canary = apps.read_namespaced_deployment(DEPLOYMENT, ns)
    canary.metadata = k8s.V1ObjectMeta(name="llm-canary", labels={"app": "llm", "drctl.io/track": "canary"})
    canary.spec.replicas = 1
    canary.status = None
    apps.create_namespaced_deployment(ns, canary)
    runtime = HAProxyRuntime(region_socket(region.cfg, region.region_cfg))
    wait_until(
        lambda: (
            len(pod_names(apps, ns, "llm-canary")) == 1
            and [s.name for s in runtime.servers("track_canary")] == pod_names(apps, ns, "llm-canary")
        ),
        timeout_s=20,
        what="the canary replica in track_canary",
    )
    # The canary track server is up once its check sees a ready replica behind it (within a second).
    wait_until(lambda: track_up(runtime, "canary"), timeout_s=10, what="the canary track server up")
    runtime.set_weight("region", "canary", 100)
    runtime.set_weight("region", "stable", 0)
    try:
        assert region.gateway.get("/v1/models").headers["X-Fleetsim-Track"] == "canary"
    finally:
        runtime.set_weight("region", "stable", 100)
        runtime.set_weight("region", "canary", 0)
    apps.delete_namespaced_deployment("llm-canary", ns)
    wait_until(
        lambda: not [r for r in region.admin.get("/replicas").json() if r["track"] == "canary"],
        timeout_s=10,
        what="the canary replica to stop",
    )
    wait_until(lambda: runtime.servers("track_canary") == [], timeout_s=10, what="track_canary to empty")


def track_up(runtime: HAProxyRuntime, track: str) -> bool:
    return {s.name: s.operational for s in runtime.servers("region")}[track]


def test_ready_endpoint_answers_200_only_while_a_weighted_track_has_a_ready_replica(
    region: RegionProcess,
) -> None:
    """GET /drctl/ready, what the global tier checks: answered by the gateway itself (no replica
    sees the check), 503 with no replica left, and 503 when the only weighted track is empty."""
    assert region.gateway.get(READY_PATH).status_code == 200
    runtime = HAProxyRuntime(region_socket(region.cfg, region.region_cfg))
    # Canary has no replica, so its track server is down within a check (another test may have
    # just emptied it).
    wait_until(lambda: not track_up(runtime, "canary"), timeout_s=10, what="the canary track down")
    runtime.set_weight("region", "canary", 100)
    runtime.set_weight("region", "stable", 0)
    try:
        assert region.gateway.get(READY_PATH).status_code == 503
    finally:
        runtime.set_weight("region", "stable", 100)
        runtime.set_weight("region", "canary", 0)
    assert region.gateway.get(READY_PATH).status_code == 200
    region.admin.post(
        "/faults/replicas", json={"action": "kill", "track": "stable", "count": 2, "stay_down": True}
    ).raise_for_status()
    wait_until(
        lambda: region.gateway.get(READY_PATH).status_code == 503, timeout_s=15, what="/drctl/ready 503"
    )
    region.admin.post("/faults/clear").raise_for_status()
    wait_until(
        lambda: region.gateway.get(READY_PATH).status_code == 200, timeout_s=20, what="/drctl/ready 200"
    )


def test_a_weighted_track_with_no_ready_replica_leaves_the_region_backend(region: RegionProcess) -> None:
    """The regional tier's own check: stable 50 / canary 50 with no canary replica serves every
    request from stable (before, the canary's half got 503 from its empty track backend)."""
    runtime = HAProxyRuntime(region_socket(region.cfg, region.region_cfg))
    runtime.set_weights("region", {"stable": 50, "canary": 50})
    try:
        wait_until(lambda: not track_up(runtime, "canary"), timeout_s=10, what="the canary track down")
        answers = [region.gateway.get("/v1/models") for _ in range(10)]
        assert [(r.status_code, r.headers.get("X-Fleetsim-Track")) for r in answers] == [(200, "stable")] * 10
    finally:
        runtime.set_weights("region", {"stable": 100, "canary": 0})


def test_a_restarted_gateway_loads_the_track_weights_from_its_state_file(region: RegionProcess) -> None:
    """The gateway keeps no weights of its own: a killed and restored gateway comes back with the
    weights in its server-state file (the state it dumped), not with any it re-applies."""
    runtime = HAProxyRuntime(region_socket(region.cfg, region.region_cfg))
    state = state_file(region.cfg, REGION)
    runtime.set_weights("region", {"stable": 70, "canary": 30})
    try:
        wait_until(lambda: _dumped(state).get("canary") == 30, 10, what="the gateway's state dump")
        assert region.admin.post("/faults/gateway", json={"action": "kill"}).status_code == 200
        # What the restarted HAProxy loads decides: change it, as an operator's dump might differ.
        rows = [ln.split(" ") for ln in state.read_text().splitlines()]
        for cols in rows[2:]:
            if cols[3] == "canary":
                cols[7] = "20"  # srv_uweight
        state.write_text("\n".join(" ".join(c) for c in rows) + "\n")
        region.admin.post("/faults/gateway", json={"action": "restore"}).raise_for_status()

        def weights() -> dict[str, int]:
            try:
                return runtime.get_weights("region")
            except HAProxyError:
                return {}

        wait_until(lambda: weights().get("canary") == 20, timeout_s=15, what="canary 20 from the state file")
        assert weights()["stable"] == 70
    finally:
        runtime.set_weights("region", {"stable": 100, "canary": 0})


def _dumped(path: Path) -> dict[str, int]:
    """srv_name -> srv_uweight in a `show servers state` dump."""
    rows = [ln.split(" ") for ln in path.read_text().splitlines() if ln and not ln.startswith(("1", "#"))]
    return {cols[3]: int(cols[7]) for cols in rows if len(cols) > 7}


def endpoints(api: k8s.DiscoveryV1Api, ns: str) -> dict[str, tuple[int, bool, bool]]:
    """pod -> (port, ready, terminating), over the stable Service's EndpointSlices."""
    out = {}
    for s in api.list_namespaced_endpoint_slice(
        ns, label_selector=f"kubernetes.io/service-name={DEPLOYMENT}"
    ).items:
        for ep in s.endpoints or []:
            out[ep.target_ref.name] = (s.ports[0].port, ep.conditions.ready, ep.conditions.terminating)
    return out


def test_endpoint_slices_follow_the_replicas(region: RegionProcess, apps: k8s.AppsV1Api, ns: str) -> None:
    disc = k8s.DiscoveryV1Api(apps.api_client)
    serving = {r["pod"]: (r["port"], True, False) for r in running(region)}
    assert len(serving) == 2
    wait_until(
        lambda: endpoints(disc, ns) == serving,
        timeout_s=5,
        interval_s=0.1,
        what="both replicas ready in the slices",
    )

    # Killed and kept down: the pod is still there, not ready, as the kubelet would report it.
    (pod,) = region.admin.post(
        "/faults/replicas", json={"action": "kill", "track": "stable", "count": 1, "stay_down": True}
    ).json()["affected"]
    wait_until(
        lambda: endpoints(disc, ns) == {**serving, pod: (serving[pod][0], False, False)},
        timeout_s=5,
        interval_s=0.1,
        what="the killed replica listed not ready",
    )

    # Scaled down (the not-ready one goes first): its endpoint leaves the slices.
    hpa = k8s.AutoscalingV2Api(apps.api_client)
    hpa.patch_namespaced_horizontal_pod_autoscaler(DEPLOYMENT, ns, {"spec": {"minReplicas": 1}})
    try:
        apps.patch_namespaced_deployment_scale(DEPLOYMENT, ns, {"spec": {"replicas": 1}})
        wait_until(
            lambda: endpoints(disc, ns) == {p: v for p, v in serving.items() if p != pod},
            timeout_s=10,
            interval_s=0.1,
            what="the scaled-away replica gone from the slices",
        )
    finally:
        hpa.patch_namespaced_horizontal_pod_autoscaler(DEPLOYMENT, ns, {"spec": {"minReplicas": 2}})


def test_pods_are_published_and_a_deleted_pod_is_replaced(
    region: RegionProcess, apps: k8s.AppsV1Api, ns: str
) -> None:
    """Deployment -> ReplicaSet -> Pod as the controllers build them; a Pod deleted through the API
    stops its replica, and the ReplicaSet's replacement is a new Pod with a new name."""
    core, disc = k8s.CoreV1Api(apps.api_client), k8s.DiscoveryV1Api(apps.api_client)
    dep = apps.read_namespaced_deployment(DEPLOYMENT, ns)
    (rs,) = [r for r in apps.list_namespaced_replica_set(ns).items if r.spec.replicas == 2]
    assert rs.metadata.owner_references[0].to_dict() == {
        "api_version": "apps/v1", "kind": "Deployment", "name": DEPLOYMENT, "uid": dep.metadata.uid,
        "controller": True, "block_owner_deletion": True,
    }  # fmt: skip
    h = rs.metadata.labels["pod-template-hash"]
    assert rs.metadata.name == f"{DEPLOYMENT}-{h}" and rs.spec.selector.match_labels["pod-template-hash"] == h
    progressing = {c.type: c.message for c in dep.status.conditions}["Progressing"]
    assert progressing == f'ReplicaSet "{rs.metadata.name}" has successfully progressed.'
    wait_until(
        lambda: apps.read_namespaced_replica_set(rs.metadata.name, ns).status.ready_replicas == 2,
        timeout_s=5,
        what="the ReplicaSet's status",
    )
    ports = {r["pod"]: r["port"] for r in running(region)}
    listed = pods(apps, ns)
    assert sorted(ports) == [p.metadata.name for p in listed]
    for p in listed:
        assert (
            p.metadata.name.startswith(f"{rs.metadata.name}-")
            and len(p.metadata.name) == len(rs.metadata.name) + 6
        )
        assert p.metadata.labels == {"app": "llm", "drctl.io/track": "stable", "pod-template-hash": h}
        owner = p.metadata.owner_references[0]
        assert (owner.kind, owner.name, owner.uid, owner.controller) == (
            "ReplicaSet",
            rs.metadata.name,
            rs.metadata.uid,
            True,
        )
        assert p.spec.node_name == f"devstack-{REGION}"
        assert p.spec.containers[0].ports[0].container_port == ports[p.metadata.name]
        assert (p.status.phase, p.status.pod_ip) == ("Running", "127.0.0.1")
        assert {c.type: c.status for c in p.status.conditions}["Ready"] == "True"
    # The fault injector's query (drctl/chaos/actions.py kill_replicas) finds them.
    assert [
        p.metadata.name
        for p in core.list_namespaced_pod(ns, label_selector="app=llm,drctl.io/track=stable").items
    ] == sorted(ports)

    victim = listed[0].metadata.name
    pid = {r["pod"]: r["pid"] for r in running(region)}[victim]
    deleted = core.delete_namespaced_pod(victim, ns)
    assert deleted.metadata.deletion_timestamp is not None  # graceful: the kubelet finishes it

    def replaced() -> list[str]:
        names = pod_names(apps, ns)
        gone = victim not in {p.metadata.name for p in core.list_namespaced_pod(ns).items}
        fresh = len(names) == 2 and victim not in names and ready(apps, ns) == 2
        return names if gone and fresh and not alive(pid) else []

    names = wait_until(replaced, timeout_s=20, what="the deleted pod gone and a new one ready")
    assert {r["pod"] for r in running(region)} == set(names)
    serving = {r["pod"]: (r["port"], True, False) for r in running(region)}
    wait_until(lambda: endpoints(disc, ns) == serving, timeout_s=5, what="the slices to follow the pods")
    uids = {p.metadata.name: p.metadata.uid for p in pods(apps, ns)}
    slices = disc.list_namespaced_endpoint_slice(
        ns, label_selector=f"kubernetes.io/service-name={DEPLOYMENT}"
    )
    refs = {ep.target_ref.name: ep.target_ref.uid for s in slices.items for ep in s.endpoints or []}
    assert refs == uids  # each endpoint points at its Pod object
