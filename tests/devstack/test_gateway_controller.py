"""The dev stack's stand-in Gateway API controller, in process against the emulated API.

Its data plane is a recorder here (the region process gives it the region gateway HAProxy):
what is checked is when weights are programmed, and the status the route then carries.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from drctl.config.schema import load_config
from drctl.devstack.gateway_controller import ROUTES, GatewayController, haproxy_weights
from drctl.devstack.kube import RegionCluster, serve_cluster
from drctl.devstack.region import seed
from tests.support.config import write_fleet_config
from tests.support.ports import free_port

NS = "inference"
TRACK_OF = {"llm-stable": "stable", "llm-canary": "canary"}


@pytest.fixture
async def cluster() -> AsyncIterator[RegionCluster]:
    async with serve_cluster("127.0.0.1", free_port()) as c:
        await c.create_object("v1/services", {"metadata": {"name": "llm-stable", "namespace": NS},
                                              "spec": {"ports": [{"port": 80}]}})  # fmt: skip
        yield c


class DataPlane:
    """Records the weights programmed; `up` False plays a gateway that is down."""

    def __init__(self) -> None:
        self.up = True
        self.programmed: list[dict[str, int]] = []

    async def __call__(self, weights: dict[str, int]) -> bool:
        if self.up:
            self.programmed.append(weights)
        return self.up


def _route(refs: list[dict[str, Any]], parent: str | None = "us-west-1-gateway") -> dict[str, Any]:
    spec: dict[str, Any] = {"rules": [{"backendRefs": refs}]}
    if parent:
        spec["parentRefs"] = [{"name": parent}]
    return {"metadata": {"name": "llm", "namespace": NS}, "spec": spec}


def _conditions(cluster: RegionCluster) -> dict[str, dict[str, Any]]:
    [parent] = cluster.read_object(ROUTES, NS, "llm")["status"]["parents"]
    return {c["type"]: c for c in parent["conditions"]}


async def test_a_change_is_programmed_after_the_delay_then_reported_at_its_generation(
    cluster: RegionCluster,
) -> None:
    plane = DataPlane()
    ctl = GatewayController(cluster, "us-west-1-gateway", 3600.0, (NS, "llm"), plane, TRACK_OF)
    await cluster.create_object(ROUTES, _route([{"name": "llm-stable", "port": 80, "weight": 100}]))
    await ctl.reconcile()
    assert plane.programmed == [] and "status" not in cluster.read_object(ROUTES, NS, "llm")  # not yet
    ctl.program_delay_s = 0.0
    plane.up = False
    await ctl.reconcile()
    assert "status" not in cluster.read_object(ROUTES, NS, "llm"), "Accepted before the data plane took it"
    plane.up = True
    await ctl.reconcile()
    assert plane.programmed == [{"stable": 100, "canary": 0}]
    conds = _conditions(cluster)
    assert (conds["Accepted"]["status"], conds["Accepted"]["observedGeneration"]) == ("True", 1)
    assert (conds["ResolvedRefs"]["status"], conds["ResolvedRefs"]["reason"]) == ("True", "ResolvedRefs")
    await ctl.reconcile()
    assert len(plane.programmed) == 1  # nothing changed: nothing programmed or written again


async def test_a_missing_backend_is_unresolved_and_a_detached_route_loses_its_status(
    cluster: RegionCluster,
) -> None:
    ctl = GatewayController(cluster, "us-west-1-gateway", 0.0, (NS, "llm"), DataPlane(), TRACK_OF)
    refs = [
        {"name": "llm-stable", "port": 80, "weight": 90},
        {"name": "llm-canary", "port": 80, "weight": 10},
    ]
    await cluster.create_object(ROUTES, _route(refs))
    await ctl.reconcile()
    resolved = _conditions(cluster)["ResolvedRefs"]
    assert (resolved["status"], resolved["reason"]) == ("False", "BackendNotFound")
    assert resolved["message"] == f"Service(s) not found: {NS}/llm-canary"
    await cluster.create_object("v1/services", {"metadata": {"name": "llm-canary", "namespace": NS},
                                                "spec": {"ports": [{"port": 80}]}})  # fmt: skip
    await ctl.reconcile()
    assert _conditions(cluster)["ResolvedRefs"]["status"] == "True"  # the Service came: resolved now
    await cluster.patch_object(ROUTES, NS, "llm", {"spec": {"parentRefs": None}})
    await ctl.reconcile()
    assert cluster.read_object(ROUTES, NS, "llm")["status"]["parents"] == []


def test_gateway_api_weights_are_scaled_to_haproxy_keeping_proportions() -> None:
    route = _route([{"name": "llm-stable", "weight": 999_000}, {"name": "llm-canary", "weight": 1_000}])
    assert haproxy_weights(route, TRACK_OF) == {"stable": 256, "canary": 1}
    assert haproxy_weights(_route([{"name": "llm-canary"}]), TRACK_OF) == {"stable": 0, "canary": 1}


@pytest.mark.parametrize(
    ("kind", "parents"), [("gateway-api", [{"name": "us-west-1-gateway"}]), ("haproxy", None)]
)
async def test_the_seeded_route_is_attached_only_when_the_regional_tier_is_the_gateway_api(
    tmp_path: Path, kind: str, parents: list[dict[str, str]] | None
) -> None:
    """On the gateway-api tier the controller drives the region gateway from the route; on the
    HAProxy tier the route is detached, so nothing fights drctl's runtime weights."""
    regional = {"kind": "gateway-api", "httproute": "llm"} if kind == "gateway-api" else {"kind": "haproxy"}
    cfg = load_config(write_fleet_config(tmp_path, {"traffic": {"regional": regional}}))
    async with serve_cluster("127.0.0.1", free_port()) as cluster:
        await seed(cluster, cfg, "us-west-1")
        route = cluster.read_object(ROUTES, cfg.region("us-west-1").kube.namespace, "llm")
    assert ([{"name": p["name"]} for p in route["spec"].get("parentRefs") or []] or None) == parents
    assert [r["name"] for r in route["spec"]["rules"][0]["backendRefs"]] == ["llm-stable"]
