"""The shipped Gateway API fleet (config/fleet.gateway-api.yaml) on a dev stack of its own: `drctl
dev up` attaches each region's HTTPRoute to its Gateway, and `drctl upgrade` runs a canary through
the routes that the dev stack's Gateway API controller programs late, with status, as a real one
does. The same file, moved onto free loopback ports."""

from __future__ import annotations

import asyncio
import shutil
from typing import Any

import pytest
from kubernetes import client

from drctl.config.schema import FleetConfig, load_config
from drctl.devstack import stack
from drctl.providers.kubernetes import KubernetesPlatform
from tests.support.cli import drctl
from tests.support.config import REPO
from tests.support.shipped import relocated

SHIPPED = REPO / "config" / "fleet.gateway-api.yaml"
IMAGE = "vllm/vllm-openai:v0.34.0"


def _route(cfg: FleetConfig, region: str) -> dict[str, Any]:
    p = KubernetesPlatform(cfg.region(region))
    api = client.CustomObjectsApi(p.api_client)
    got: dict[str, Any] = api.get_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", p.namespace, "httproutes", "llm"
    )
    return got


@pytest.mark.ownstack
async def test_the_gateway_api_fleet_upgrades_through_its_routes() -> None:
    path = relocated(
        SHIPPED, {"upgrade": {"steps_percent": [50, 100], "step_pause_s": 1, "scale_down_delay_s": 0}}
    )
    cfg = load_config(path)
    assert cfg.traffic.regional_tier.kind == "gateway-api"
    try:
        up = await asyncio.to_thread(drctl, "dev", "up", "-c", str(path), timeout_s=300)
        assert up.returncode == 0, up.stdout + up.stderr
        for region in cfg.region_names:
            route = _route(cfg, region)
            assert [p["name"] for p in route["spec"]["parentRefs"]] == [f"{region}-gateway"], route
        done = await asyncio.to_thread(
            drctl, "upgrade", "--image", IMAGE, "--yes", "-c", str(path), timeout_s=400
        )
        assert done.returncode == 0, done.stdout + done.stderr
        for region in cfg.region_names:
            p = KubernetesPlatform(cfg.region(region))
            assert p.get_deployment(cfg.workload.deployment_name("stable")).image == IMAGE
            route = _route(cfg, region)
            refs = [(r["name"], r.get("weight")) for r in route["spec"]["rules"][0]["backendRefs"]]
            assert refs == [(cfg.workload.deployment_name("stable"), 100)], route
            (parent,) = route["status"]["parents"]
            accepted = {c["type"]: c for c in parent["conditions"]}["Accepted"]
            assert accepted["status"] == "True"
            assert accepted["observedGeneration"] == route["metadata"]["generation"], route
    finally:
        down = await asyncio.to_thread(drctl, "dev", "down", "-c", str(path), timeout_s=120)
        stack.down(cfg)
        shutil.rmtree(path.parent, ignore_errors=True)
        assert down.returncode == 0, down.stderr
