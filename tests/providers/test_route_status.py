"""Gateway API weights count only once the route's controller accepted them; a track's Service goes
only once no route refers to it.

Against the emulated API with the dev stack's stand-in controller (drctl/devstack/gateway_controller.py),
which programs a route `DELAY_S` after it changed and reports status.parents[].conditions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
from kubernetes import client
from temporalio.testing import ActivityEnvironment

from activities.upgrade import UpgradeActivities
from drctl.config.schema import FleetConfig, parse_config
from drctl.devstack.gateway_controller import GatewayController
from drctl.devstack.kube import RegionCluster, serve_cluster
from drctl.models.upgrade import RegionTrackRequest
from drctl.providers.gateway_api import GROUP, PLURAL, VERSION, GatewayApiRegionalTraffic
from drctl.providers.kubernetes import api_client_for
from drctl.providers.route_status import RouteNotProgrammed
from tests.support.kubeapi import accepted_at, running
from tests.support.loop_thread import LoopThread
from tests.support.ports import free_port
from tests.support.wait import wait_until

NS, DELAY_S = "inference", 0.5


@pytest.fixture(scope="module")
def stack() -> Iterator[tuple[FleetConfig, RegionCluster]]:
    lt = LoopThread()
    port = free_port()
    cluster = lt.enter(serve_cluster("127.0.0.1", port))
    lt.enter(running(GatewayController(cluster, "us-west-1-gateway", program_delay_s=DELAY_S)))
    yield (
        parse_config(f"""
name: routes
regions:
  - name: us-west-1
    weight: 60
    gateway_url: "http://127.0.0.1:1"
    kube: {{api_url: "http://127.0.0.1:{port}", namespace: {NS}}}
workload: {{app: llm}}
traffic:
  global_endpoint: http://127.0.0.1:3
  global: {{kind: haproxy, runtime_socket: /tmp/unused.sock}}
  regional: {{kind: gateway-api, httproute: llm}}
"""),
        cluster,
    )
    lt.close()


@pytest.fixture
def api(
    stack: tuple[FleetConfig, RegionCluster],
) -> Iterator[tuple[client.CustomObjectsApi, client.CoreV1Api]]:
    """Services llm-stable and llm-canary, and route `llm` on Gateway us-west-1-gateway: stable 100."""
    api = api_client_for(stack[0].region("us-west-1").kube)
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    for track, port in (("stable", 8000), ("canary", 8001)):
        body: Any = {"metadata": {"name": f"llm-{track}"}, "spec": {"ports": [{"port": port}]}}
        core.create_namespaced_service(NS, body)
    refs = [{"name": "llm-stable", "port": 8000, "weight": 100}]
    route = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "HTTPRoute", "metadata": {"name": "llm"},
             "spec": {"parentRefs": [{"name": "us-west-1-gateway"}], "rules": [{"backendRefs": refs}]}}  # fmt: skip
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, route)
    yield custom, core
    for name in ("llm", "other"):
        try:
            custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name)
        except client.ApiException:
            pass
    for track in ("stable", "canary"):
        try:
            core.delete_namespaced_service(f"llm-{track}", NS)
        except client.ApiException:
            pass


def read(custom: client.CustomObjectsApi, name: str = "llm") -> dict[str, Any]:
    return cast(dict[str, Any], custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name))


def condition(route: dict[str, Any], ctype: str) -> dict[str, Any]:
    [parent] = route["status"]["parents"]
    return next(c for c in parent["conditions"] if c["type"] == ctype)


def test_a_weight_counts_once_accepted_at_the_generation_written(stack: Any, api: Any) -> None:
    gw = GatewayApiRegionalTraffic.from_config(stack[0])
    gw.set_track_weights("us-west-1", {"stable": 90, "canary": 10})
    route = read(api[0])  # no waiting here: the call returned only once the weights were in effect
    assert accepted_at(route), route.get("status")
    assert condition(route, "ResolvedRefs")["status"] == "True"
    assert condition(route, "Accepted")["observedGeneration"] == route["metadata"]["generation"]


def test_a_route_no_controller_programs_is_an_error_naming_it_and_its_conditions(
    stack: Any, api: Any
) -> None:
    custom, _ = api
    route = read(custom)
    route["spec"]["parentRefs"] = [{"name": "elsewhere"}]  # a Gateway nobody here implements
    custom.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "llm", route)
    wait_until(lambda: not read(custom).get("status", {}).get("parents"), timeout_s=10, what="status cleared")
    gw = GatewayApiRegionalTraffic.from_config(stack[0])
    gw.accept_timeout_s = 1.0
    with pytest.raises(RouteNotProgrammed) as info:
        gw.set_track_weights("us-west-1", {"stable": 90, "canary": 10})
    message = str(info.value)
    assert message.startswith(f"HTTPRoute {NS}/llm in us-west-1: generation ")
    assert "no parent Gateway has reported on it" in message and "no status.parents" in message
    assert info.value.error.retryable  # a late controller may still come: the activity retries


def test_a_backend_ref_to_a_missing_service_is_reported_unresolved(stack: Any, api: Any) -> None:
    custom, _ = api
    route = read(custom)
    route["spec"]["rules"][0]["backendRefs"].append({"name": "llm-blue", "port": 80, "weight": 0})
    written = custom.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "llm", route)
    wait_until(lambda: accepted_at(read(custom)), timeout_s=10, what="the route's status")
    resolved = condition(read(custom), "ResolvedRefs")
    assert (resolved["status"], resolved["reason"]) == ("False", "BackendNotFound")
    assert f"{NS}/llm-blue" in resolved["message"]
    assert resolved["observedGeneration"] == written["metadata"]["generation"]


def test_traffic_to_a_track_without_a_service_is_refused(stack: Any, api: Any) -> None:
    custom, core = api
    gw = GatewayApiRegionalTraffic.from_config(stack[0])
    gw.set_track_weights("us-west-1", {"stable": 90, "canary": 10})
    core.delete_namespaced_service("llm-canary", NS)  # behind drctl's back
    with pytest.raises(RouteNotProgrammed) as info:
        gw.set_track_weights("us-west-1", {"stable": 50, "canary": 50})
    assert "tracks canary have weight but no Service" in str(info.value)
    assert "ResolvedRefs=False (BackendNotFound" in str(info.value)
    assert not info.value.error.retryable


def test_removing_a_track_drops_its_route_reference_before_its_service(stack: Any, api: Any) -> None:
    custom, core = api
    cfg = stack[0]
    gw = GatewayApiRegionalTraffic.from_config(cfg)
    gw.set_track_weights("us-west-1", {"stable": 90, "canary": 10})
    gw.set_track_weights("us-west-1", {"stable": 100, "canary": 0})
    assert "canary" in gw.get_track_weights("us-west-1")  # a reference at weight 0, as promotion leaves it
    ActivityEnvironment().run(
        UpgradeActivities(cfg).remove_track, RegionTrackRequest(region="us-west-1", track="canary")
    )
    route = read(custom)
    assert [r["name"] for r in route["spec"]["rules"][0]["backendRefs"]] == ["llm-stable"]
    with pytest.raises(client.ApiException):
        core.read_namespaced_service("llm-canary", NS)
    # Programmed before the Service went: the controller never saw a reference to a missing Service.
    wait_until(lambda: accepted_at(read(custom)), timeout_s=10, what="the route's status")
    assert condition(read(custom), "ResolvedRefs")["status"] == "True"


def test_a_track_with_weight_or_another_route_keeps_its_service(stack: Any, api: Any) -> None:
    custom, core = api
    gw = GatewayApiRegionalTraffic.from_config(stack[0])
    gw.set_track_weights("us-west-1", {"stable": 90, "canary": 10})
    with pytest.raises(ValueError, match="track 'canary' still has weight 10 in HTTPRoute inference/llm"):
        gw.release_track("us-west-1", "canary")
    gw.set_track_weights("us-west-1", {"stable": 100, "canary": 0})
    other = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "HTTPRoute", "metadata": {"name": "other"},
             "spec": {"rules": [{"backendRefs": [{"name": "llm-canary", "port": 8001}]}]}}  # fmt: skip
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, other)
    with pytest.raises(
        ValueError, match=r"llm-canary in us-west-1 is still a backend of HTTPRoute\(s\) other"
    ):
        gw.release_track("us-west-1", "canary")
    core.read_namespaced_service("llm-canary", NS)  # still there
