"""Gateway API regional tier against the dev stack's emulated Kubernetes API (drctl/devstack/kube.py).

The cluster is seeded like the dev stack: track Services and HTTPRoute `llm` with a stable
backendRef at weight 100, in us-west-1's namespace. us-east-1 uses a namespace with no route.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from drctl.config.schema import FleetConfig, parse_config
from drctl.devstack.gateway_controller import GatewayController
from drctl.devstack.kube import serve_cluster
from drctl.providers.gateway_api import GROUP, PLURAL, VERSION, GatewayApiRegionalTraffic
from drctl.providers.kubernetes import api_client_for
from drctl.providers.traffic_factory import regional_traffic
from tests.support.kubeapi import accepted_at, running
from tests.support.loop_thread import LoopThread
from tests.support.ports import free_port
from tests.support.wait import wait_until

NS = "inference"


@pytest.fixture(scope="module")
def cfg() -> Iterator[FleetConfig]:
    lt = LoopThread()
    port = free_port()
    cluster = lt.enter(serve_cluster("127.0.0.1", port))
    # The route's controller: it accepts each change a moment later, as a real one would.
    lt.enter(running(GatewayController(cluster, "gateway", program_delay_s=0.1)))
    api = f"http://127.0.0.1:{port}"
    yield parse_config(
        f"""
name: gw
regions:
  - {{name: us-west-1, weight: 60, gateway_url: "http://127.0.0.1:1", kube: {{api_url: "{api}", namespace: {NS}}}}}
  - {{name: us-east-1, weight: 40, gateway_url: "http://127.0.0.1:2", kube: {{api_url: "{api}", namespace: empty}}}}
workload: {{app: llm}}
traffic:
  global_endpoint: http://127.0.0.1:3
  global: {{kind: haproxy, runtime_socket: /tmp/unused.sock}}
  regional: {{kind: gateway-api, httproute: llm}}
"""
    )
    lt.close()


@pytest.fixture(scope="module")
def kube(cfg: FleetConfig) -> tuple[client.CustomObjectsApi, client.CoreV1Api]:
    api = api_client_for(cfg.region("us-west-1").kube)
    core = client.CoreV1Api(api)
    for track, port in (("stable", 8000), ("canary", 8001)):
        body: Any = {  # the client accepts plain dicts as well as V1Service
            "metadata": {"name": f"llm-{track}", "labels": {"app": "llm", "drctl.io/track": track}},
            "spec": {"selector": {"app": "llm", "drctl.io/track": track}, "ports": [{"port": port}]},
        }
        core.create_namespaced_service(NS, body)
    return client.CustomObjectsApi(api), core


@pytest.fixture
def route(kube: tuple[client.CustomObjectsApi, client.CoreV1Api]) -> Iterator[None]:
    """A freshly seeded HTTPRoute per test: stable 100, plus a rule that is not ours."""
    custom, _ = kube
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        NS,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "HTTPRoute",
            "metadata": {"name": "llm"},
            "spec": {
                "parentRefs": [{"name": "gateway"}],
                "rules": [
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": "/admin"}}],
                        "backendRefs": [{"name": "admin", "port": 9000}],
                    },
                    {
                        "backendRefs": [
                            {
                                "group": "",
                                "kind": "Service",
                                "name": "llm-stable",
                                "port": 8000,
                                "weight": 100,
                            }
                        ]
                    },
                ],
            },
        },
    )
    yield
    custom.delete_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "llm")


def read_route(kube: tuple[client.CustomObjectsApi, client.CoreV1Api]) -> dict[str, Any]:
    return cast(dict[str, Any], kube[0].get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "llm"))


def test_canary_then_switch(cfg: FleetConfig, kube: tuple[Any, Any], route: None) -> None:
    gw = regional_traffic(cfg)
    assert isinstance(gw, GatewayApiRegionalTraffic)
    assert gw.get_track_weights("us-west-1") == {"stable": 100}
    generation = read_route(kube)["metadata"]["generation"]

    gw.set_track_weights("us-west-1", {"stable": 95, "canary": 5})

    obj = read_route(kube)
    # Not a track rule: untouched, as the API server stored it (with the CRD's defaults filled in).
    assert obj["spec"]["rules"][0]["backendRefs"] == [
        {"name": "admin", "port": 9000, "group": "", "kind": "Service", "weight": 1}
    ]
    assert obj["spec"]["rules"][1]["backendRefs"] == [
        {"group": "", "kind": "Service", "name": "llm-stable", "port": 8000, "weight": 95},
        {"group": "", "kind": "Service", "name": "llm-canary", "port": 8001, "weight": 5},
    ]
    assert obj["metadata"]["generation"] == generation + 1
    assert gw.get_track_weights("us-west-1") == {"stable": 95, "canary": 5}

    gw.set_track_weights("us-west-1", {"stable": 0, "canary": 100})
    assert gw.get_track_weights("us-west-1") == {"stable": 0, "canary": 100}


@pytest.mark.parametrize(
    ("region", "weights", "message"),
    [
        ("us-west-1", {"stable": 1, "purple": 1}, "purple"),
        ("us-west-1", {"stable": 1_000_001}, "stable"),
        ("us-west-1", {"stable": -5}, "stable"),
        ("us-west-1", {"stable": 0, "canary": 0}, "all zero"),
        ("us-west-1", {"stable": 0}, "all zero"),  # canary has no backendRef: 0 as well
        ("us-west-1", {"stable": 50, "blue": 50}, "llm-blue"),  # no Service for blue
        ("eu-west-9", {"stable": 1}, "eu-west-9"),
    ],
)
def test_bad_requests_change_nothing(
    cfg: FleetConfig, kube: tuple[Any, Any], route: None, region: str, weights: dict[str, int], message: str
) -> None:
    gw = GatewayApiRegionalTraffic.from_config(cfg)
    before = read_route(kube)
    with pytest.raises(ValueError, match=message):
        gw.set_track_weights(region, weights)
    after = read_route(kube)
    # Nothing written: the spec and its generation are as they were. (Not the resourceVersion: the
    # stand-in's Gateway controller may still be writing its late status to the new route.)
    assert after["spec"] == before["spec"]
    assert after["metadata"]["generation"] == before["metadata"]["generation"]


def test_zero_weight_for_unrouted_track_adds_nothing(
    cfg: FleetConfig, kube: tuple[Any, Any], route: None
) -> None:
    gw = GatewayApiRegionalTraffic.from_config(cfg)
    gw.set_track_weights("us-west-1", {"stable": 80, "blue": 0})
    names = [r["name"] for r in read_route(kube)["spec"]["rules"][1]["backendRefs"]]
    assert names == ["llm-stable"]
    assert gw.get_track_weights("us-west-1") == {"stable": 80}


def test_missing_route_propagates_api_error(cfg: FleetConfig) -> None:
    gw = GatewayApiRegionalTraffic.from_config(cfg)
    with pytest.raises(ApiException) as err:
        gw.set_track_weights("us-east-1", {"stable": 1})
    assert err.value.status == 404


def _modifiers(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in rule.get("filters") or [] if f.get("type") == "ResponseHeaderModifier"]


def test_weight_change_writes_the_region_header_filter_on_track_rules_only(
    cfg: FleetConfig, kube: tuple[Any, Any], route: None
) -> None:
    gw = GatewayApiRegionalTraffic.from_config(cfg)
    gw.set_track_weights("us-west-1", {"stable": 95, "canary": 5})
    admin_rule, track_rule = read_route(kube)["spec"]["rules"]
    assert "filters" not in admin_rule  # a rule drctl does not manage is left alone
    assert _modifiers(track_rule) == [
        {
            "type": "ResponseHeaderModifier",
            "responseHeaderModifier": {"set": [{"name": cfg.traffic.region_header, "value": "us-west-1"}]},
        }
    ]


def test_ensure_region_header_extends_an_existing_modifier_once(
    cfg: FleetConfig, kube: tuple[Any, Any], route: None
) -> None:
    custom, _ = kube
    obj = read_route(kube)
    obj["spec"]["rules"][1]["filters"] = [
        {
            "type": "ResponseHeaderModifier",
            "responseHeaderModifier": {
                "set": [
                    {"name": "x-team", "value": "inference"},
                    {"name": "X-DRCTL-REGION", "value": "stale"},
                ],
                "remove": ["server"],
            },
        }
    ]
    custom.replace_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "llm", obj)
    gw = GatewayApiRegionalTraffic.from_config(cfg)

    assert gw.ensure_region_header("us-west-1") is True
    after = read_route(kube)
    [mod] = _modifiers(after["spec"]["rules"][1])
    assert mod["responseHeaderModifier"] == {
        "set": [{"name": "x-team", "value": "inference"}, {"name": "X-DRCTL-REGION", "value": "us-west-1"}],
        "remove": ["server"],
    }
    assert gw.get_track_weights("us-west-1") == {"stable": 100}  # weights untouched
    # Already labelled: nothing is written (no new resourceVersion, no watch event for the gateway),
    # once the controller has reported on the change (its status write moves the resourceVersion).
    wait_until(lambda: accepted_at(read_route(kube)), timeout_s=10, what="the route's status")
    after = read_route(kube)
    assert gw.ensure_region_header("us-west-1") is False
    assert read_route(kube)["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"]


def test_worker_start_labels_its_regions_routes_and_survives_a_missing_one(
    cfg: FleetConfig, kube: tuple[Any, Any], route: None, caplog: pytest.LogCaptureFixture
) -> None:
    from drctl.worker.process import _label_routes

    with caplog.at_level("INFO", logger="drctl.worker.process"):
        _label_routes(cfg, ["us-west-1", "us-east-1"])  # us-east-1's namespace has no route: a warning
    [mod] = _modifiers(read_route(kube)["spec"]["rules"][1])
    assert mod["responseHeaderModifier"]["set"] == [{"name": "x-drctl-region", "value": "us-west-1"}]
    assert "could not label the HTTPRoute of us-east-1" in caplog.text
