"""An emulated Kubernetes API server for provider tests: the dev stack's cluster plus RBAC denials.

Fixtures `cluster` (module-scoped, on a background loop: the official client is synchronous) and
`platform` (a KubernetesPlatform against it); import them into a test module to use them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import aiohttp.web
import attrs
import pytest
from kmock._internal import rendering

from drctl.config.schema import KubeConfig, RegionConfig
from drctl.devstack.gateway_controller import GatewayController
from drctl.devstack.kube import RegionCluster
from drctl.providers.kubernetes import KubernetesPlatform
from tests.support.kubeapi import running
from tests.support.loop_thread import LoopThread

NS = "inference"
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@attrs.define(kw_only=True)
class RbacCluster(RegionCluster):
    """The emulated API server plus RBAC denials, answered as a real API server words them."""

    denied: set[tuple[str, str]] = attrs.field(factory=set)  # (verb, "deployments/scale")
    # Requests served, by (verb, "deployments/scale"): what a test bounds a wait's cost with.
    served: Counter[tuple[str, str]] = attrs.field(factory=Counter)

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        res = request.resource
        if res is not None and res.plural:
            resource = res.plural + (f"/{request.subresource}" if request.subresource else "")
            method = request.method.value
            verb = _VERBS.get(method) or ("get" if request.name else "list")
            self.served[verb, resource] += 1
            if (verb, resource) in self.denied:
                message = (f'{resource.split("/")[0]}.{res.group or "core"} "{request.name}" is forbidden: User '
                           f'"system:serviceaccount:drctl:drctl" cannot {verb} resource "{resource}" in API group '
                           f'"{res.group}" in the namespace "{request.namespace}"')  # fmt: skip
                body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": message, "reason": "Forbidden", "code": 403}  # fmt: skip
                return aiohttp.web.json_response(body, status=403)
        return await super()._handle(request)


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[RbacCluster, str]]:
    lt = LoopThread()
    served = lt.serve_cluster(RbacCluster)
    # Routes attached to Gateway `gateway` are programmed (status.parents) as a controller would.
    lt.enter(running(GatewayController(served[0], "gateway", program_delay_s=0.05)))
    yield served
    lt.close()


@pytest.fixture(scope="module")
def platform(cluster: tuple[RbacCluster, str]) -> Iterator[KubernetesPlatform]:
    region = RegionConfig(name="us-west-1", weight=60, max_replicas=5, gateway_url="http://127.0.0.1:1",
                          kube=KubeConfig(api_url=cluster[1], namespace=NS))  # fmt: skip
    p = KubernetesPlatform(region, poll_interval_s=0.05)
    yield p
    p.close()


def deployment_manifest(
    name: str, replicas: int = 2, image: str = "vllm/vllm-openai:v0.6.3"
) -> dict[str, Any]:
    labels = {"app": "llm", "drctl.io/track": name.rsplit("-", 1)[-1]}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "server", "image": image}]}}},
    }  # fmt: skip
