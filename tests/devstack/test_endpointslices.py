"""The emulated EndpointSlice controller: what it publishes for the track Services, and how it follows pods."""

from __future__ import annotations

from typing import Any

from drctl.devstack.endpointslices import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    SERVICE_NAME_LABEL,
    SLICES,
    PodEndpoint,
    desired_slices,
    publish,
)
from drctl.devstack.kube import RegionCluster

NS = "inference"
STABLE = {"app": "llm", "drctl.io/track": "stable"}
CANARY = {"app": "llm", "drctl.io/track": "canary"}


def _service(name: str, selector: dict[str, str] | None, uid: str = "u1") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS, "uid": uid, "labels": {"app": "llm", "team": "ml"}},
            "spec": {"selector": selector, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]}}  # fmt: skip


def _pod(name: str, port: int, ready: bool, labels: dict[str, str] = STABLE, **kw: Any) -> PodEndpoint:
    return PodEndpoint(
        name=name, namespace=NS, port=port, ready=ready, labels=labels, uid=f"uid-{name}", **kw
    )


def _endpoints(
    slices: dict[tuple[str, str], dict[str, Any]], service: str
) -> dict[str, tuple[int, dict[str, bool]]]:
    """pod -> (port, conditions) over every slice of one Service."""
    out = {}
    for s in slices.values():
        if s["metadata"]["labels"][SERVICE_NAME_LABEL] == service:
            for ep in s["endpoints"] or []:
                out[ep["targetRef"]["name"]] = (s["ports"][0]["port"], ep["conditions"])
    return out


def test_a_slice_per_pod_port_with_the_controllers_labels_and_conditions() -> None:
    services = [
        _service("llm-stable", STABLE),
        _service("llm-canary", CANARY, uid="u2"),
        _service("external", None),
    ]
    pods = [_pod("llm-stable-0", 4001, True), _pod("llm-stable-1", 4002, False),
            _pod("llm-stable-2", 4003, True, terminating=True), _pod("llm-canary-0", 4004, True, labels=CANARY),
            _pod("elsewhere", 4005, True, labels={**STABLE, "x": "y"})]  # fmt: skip
    pods[-1].namespace = "other"
    slices = desired_slices(services, pods)

    assert _endpoints(slices, "llm-stable") == {
        "llm-stable-0": (4001, {"ready": True, "serving": True, "terminating": False}),
        "llm-stable-1": (4002, {"ready": False, "serving": False, "terminating": False}),
        "llm-stable-2": (4003, {"ready": False, "serving": True, "terminating": True}),
    }
    assert _endpoints(slices, "llm-canary") == {
        "llm-canary-0": (4004, {"ready": True, "serving": True, "terminating": False})
    }
    # A selector-less Service gets no managed slice: its endpoints are someone else's to publish.
    assert {s["metadata"]["labels"][SERVICE_NAME_LABEL] for s in slices.values()} == {
        "llm-stable",
        "llm-canary",
    }
    one = next(s for s in slices.values() if s["endpoints"][0]["targetRef"]["name"] == "llm-stable-0")
    assert one["addressType"] == "IPv4" and one["endpoints"][0]["addresses"] == ["127.0.0.1"]
    assert one["endpoints"][0]["targetRef"] == {
        "kind": "Pod",
        "namespace": NS,
        "name": "llm-stable-0",
        "uid": "uid-llm-stable-0",
    }
    assert one["ports"] == [{"name": "http", "port": 4001, "protocol": "TCP"}]
    assert one["metadata"]["labels"] == {
        "app": "llm",
        "team": "ml",
        SERVICE_NAME_LABEL: "llm-stable",
        MANAGED_BY_LABEL: MANAGED_BY,
    }
    assert one["metadata"]["ownerReferences"][0] == {
        "apiVersion": "v1",
        "kind": "Service",
        "name": "llm-stable",
        "uid": "u1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert one["metadata"]["name"].startswith("llm-stable-")


def test_a_service_without_pods_keeps_one_empty_slice() -> None:
    (only,) = desired_slices([_service("llm-canary", CANARY)], [_pod("llm-stable-0", 4001, True)]).values()
    assert only["endpoints"] is None and only["ports"] is None
    assert only["metadata"]["labels"][SERVICE_NAME_LABEL] == "llm-canary"


async def test_publish_follows_pods_and_leaves_other_slices_alone() -> None:
    cluster = RegionCluster()
    svc = await cluster.create_object("v1/services", _service("llm-stable", STABLE), namespace=NS)
    foreign = {"metadata": {"name": "llm-stable-manual", "namespace": NS,
                            "labels": {SERVICE_NAME_LABEL: "llm-stable", MANAGED_BY_LABEL: "someone-else"}},
               "addressType": "IPv4", "endpoints": [], "ports": []}  # fmt: skip
    await cluster.create_object(SLICES, foreign, namespace=NS)

    def published() -> dict[str, tuple[int, dict[str, bool]]]:
        stored = cluster.list_objects(SLICES, NS, f"{MANAGED_BY_LABEL}={MANAGED_BY}")
        return _endpoints({(NS, s["metadata"]["name"]): s for s in stored}, "llm-stable")

    starting = [_pod("llm-stable-0", 4001, False), _pod("llm-stable-1", 4002, False)]
    assert await publish(cluster, [svc], starting) == 2
    assert {p: c["ready"] for p, (_, c) in published().items()} == {
        "llm-stable-0": False,
        "llm-stable-1": False,
    }
    assert await publish(cluster, [svc], starting) == 0  # nothing changed: no write, no watch event

    ready = [_pod("llm-stable-0", 4001, True), _pod("llm-stable-1", 4002, True)]
    assert await publish(cluster, [svc], ready) == 2
    assert {p: c["ready"] for p, (_, c) in published().items()} == {
        "llm-stable-0": True,
        "llm-stable-1": True,
    }

    # Killed (kept down): the pod stays, not ready. Scaled away: gone, and so is its slice.
    assert await publish(cluster, [svc], [_pod("llm-stable-0", 4001, False)]) == 2
    assert published() == {"llm-stable-0": (4001, {"ready": False, "serving": False, "terminating": False})}
    assert await publish(cluster, [svc], []) == 2  # its slice goes, an empty placeholder comes
    assert published() == {}
    assert len(cluster.list_objects(SLICES, NS, f"{MANAGED_BY_LABEL}={MANAGED_BY}")) == 1

    # The Service is deleted: its managed slices go; the hand-made one stays.
    assert await publish(cluster, [], []) == 1
    assert [s["metadata"]["name"] for s in cluster.list_objects(SLICES, NS)] == ["llm-stable-manual"]
