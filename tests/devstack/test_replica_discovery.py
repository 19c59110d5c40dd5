"""On the dev stack the product finds replicas as in production: the track Services' EndpointSlices.

A replica that only an EndpointSlice names (a server the node agent never started, in a slice
another controller manages) is probed by InferenceProber with its default source, as the monitor's
activity, `drctl status` and the failover preflight build it. The dev stack's admin API does not
know that server, so it can only have come through the Kubernetes API.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web
from kubernetes import client as k8s

from drctl.config.schema import FleetConfig
from drctl.devstack import stack
from drctl.devstack.fleetsim import FleetsimSettings, build_app
from drctl.models.health import ProbeStatus
from drctl.providers.probe import InferenceProber
from tests.support.ports import free_port

pytestmark = [pytest.mark.slow, pytest.mark.devstack]
REGION, POD = "us-west-1", "llm-stable-outside"


@pytest.fixture
async def slice_only_replica(fleet_config: FleetConfig, dev_stack: stack.StackInfo) -> AsyncIterator[str]:
    """A fleetsim server, published in the stable Service's slices by a controller of the test's own."""
    runner = web.AppRunner(
        build_app(FleetsimSettings(region=REGION, replica=POD, model=fleet_config.workload.model))
    )
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    r = fleet_config.region(REGION)
    api = k8s.DiscoveryV1Api(k8s.ApiClient(k8s.Configuration(host=r.kube.api_url)))
    service = fleet_config.workload.deployment_name("stable")
    body = {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
        "metadata": {"name": f"{service}-outside", "labels": {
            "kubernetes.io/service-name": service, "endpointslice.kubernetes.io/managed-by": "e2e.drctl.io"}},
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True, "serving": True, "terminating": False},
                       "targetRef": {"kind": "Pod", "namespace": r.kube.namespace, "name": POD}}],
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
    }  # fmt: skip
    api.create_namespaced_endpoint_slice(r.kube.namespace, body)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        api.delete_namespaced_endpoint_slice(body["metadata"]["name"], r.kube.namespace)
        await runner.cleanup()


async def test_a_replica_only_its_endpoint_slice_names_is_probed(
    slice_only_replica: str, fleet_config: FleetConfig
) -> None:
    r = fleet_config.region(REGION)
    # The node agent's own controller leaves a slice it does not manage alone, and its admin API
    # never heard of the server: only the Kubernetes API can lead the prober there.
    async with httpx.AsyncClient(timeout=5) as http:
        known = (await http.get(f"{r.devstack_admin_url}/replicas")).json()
    assert POD not in {x["pod"] for x in known}

    p = await InferenceProber(fleet_config).probe_region(REGION)
    probed = {t.target: t for t in p.replicas}
    assert probed[POD].url == slice_only_replica and probed[POD].status == ProbeStatus.HEALTHY, p.reason
    # Answered, not merely listed: its /health latency and its /metrics (the completion sample rotates).
    assert probed[POD].latency_ms is not None and probed[POD].queue_depth == 0.0
    assert len(probed) == r.replicas + 1 and p.status == ProbeStatus.HEALTHY, p.reason
