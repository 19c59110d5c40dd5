"""KubernetesReplicaSource against an emulated API server whose slices the emulated controller published."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from drctl.config.schema import FleetConfig, parse_config
from drctl.devstack.endpointslices import SERVICE_NAME_LABEL, PodEndpoint, publish
from drctl.devstack.kube import RegionCluster
from drctl.providers import replicas as replicas_mod
from drctl.providers.replicas import KubernetesReplicaSource
from tests.support.loop_thread import LoopThread

NS = "inference"


def _cfg(kube: str) -> FleetConfig:
    # kubeconfig files of these tests live under the temp dir: the config allows it for secrets.
    return parse_config(f"""
name: replicas-test
secret_dirs: [{tempfile.gettempdir()}]
regions:
  - name: us-west-1
    weight: 60
    gateway_url: http://127.0.0.1:1
    kube: {kube}
workload: {{app: llm, model: fleetsim-tiny}}
traffic:
  global_endpoint: http://127.0.0.1:1
  global: {{kind: route53, hosted_zone_id: Z1, record_name: api.example.com, targets: {{us-west-1: a}}}}
  regional: {{kind: gateway-api}}
""")


def _service(name: str, track: str) -> dict[str, Any]:
    sel = {"app": name.split("-")[0], "drctl.io/track": track}
    return {"metadata": {"name": name, "namespace": NS, "labels": sel},
            "spec": {"selector": sel, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]}}  # fmt: skip


def _pod(name: str, port: int, app: str, track: str, **state: bool) -> PodEndpoint:
    return PodEndpoint(
        name=name, namespace=NS, port=port, ready=True, labels={"app": app, "drctl.io/track": track}, **state
    )


async def _seed(cluster: RegionCluster) -> None:
    named = (("llm-stable", "stable"), ("llm-canary", "canary"), ("other-stable", "stable"))
    services = [await cluster.create_object("v1/services", _service(n, t), namespace=NS) for n, t in named]
    pods = [
        PodEndpoint(
            name=f"llm-stable-{i}",
            namespace=NS,
            port=5000 + i,
            ready=i != 3,
            labels={"app": "llm", "drctl.io/track": "stable"},
            uid=f"u{i}",
        )
        for i in range(7)
    ]
    pods += [
        _pod("llm-stable-old", 5100, "llm", "stable", terminating=True),
        _pod("llm-canary-0", 5200, "llm", "canary"),
        _pod("other-stable-0", 5300, "other", "stable"),
    ]
    await publish(cluster, services, pods)


@pytest.fixture(scope="module")
def api_url() -> Iterator[str]:
    lt = LoopThread()
    try:
        cluster, url = lt.serve_cluster(RegionCluster)
        lt.run(_seed(cluster))
        yield url
    finally:
        lt.close()


async def test_track_service_slices_are_selected_and_paged(
    api_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[dict[str, Any]] = []
    real = client.DiscoveryV1Api.list_namespaced_endpoint_slice

    def spy(self: client.DiscoveryV1Api, namespace: str, **kw: Any) -> Any:
        calls.append(kw)
        return real(self, namespace, **kw)

    monkeypatch.setattr(client.DiscoveryV1Api, "list_namespaced_endpoint_slice", spy)
    monkeypatch.setattr(replicas_mod, "PAGE_SIZE", 3)
    cfg = _cfg(f'{{api_url: "{api_url}", namespace: {NS}}}')
    found = await KubernetesReplicaSource(cfg).replicas(cfg.region("us-west-1"))

    # Not-ready llm-stable-3 is a failing replica and stays listed; the terminating pod does not,
    # nor does another app's Service that the label selection keeps on the server.
    assert sorted((r.name, r.url, r.track) for r in found) == sorted(
        [(f"llm-stable-{i}", f"http://127.0.0.1:{5000 + i}", "stable") for i in range(7)]
        + [("llm-canary-0", "http://127.0.0.1:5200", "canary")]
    )
    # Ready is the slice's own condition: what the capacity model counts as serving.
    assert sorted(r.name for r in found if not r.ready) == ["llm-stable-3"]
    assert len(calls) == 3 and calls[0]["_continue"] is None and all(c["_continue"] for c in calls[1:])
    assert calls[0]["label_selector"] == f"{SERVICE_NAME_LABEL} in (llm-blue,llm-canary,llm-green,llm-stable)"


def test_emulated_server_pages_like_the_api_server(api_url: str) -> None:
    api = client.DiscoveryV1Api(client.ApiClient(client.Configuration(host=api_url)))
    whole = [s.metadata.name for s in api.list_namespaced_endpoint_slice(NS).items]
    names, token, pages = [], None, 0
    while pages < 20:
        page = api.list_namespaced_endpoint_slice(NS, limit=4, _continue=token)
        names += [s.metadata.name for s in page.items]
        pages, token = pages + 1, page.metadata.var_continue
        assert (page.metadata.remaining_item_count is None) == (token is None)
        if not token:
            break
    assert names == whole and pages == -(-len(whole) // 4)
    with pytest.raises(ApiException) as err:
        api.list_namespaced_endpoint_slice(NS, limit=4, _continue="not-a-token")
    assert err.value.status == 400


def test_clients_are_built_on_first_use(tmp_path: Any) -> None:
    """A worker starts while a region's kubeconfig is unusable; the listing then names the problem."""
    cfg = _cfg(f'{{kubeconfig_path: "{tmp_path / "absent"}", context: nope, namespace: {NS}}}')
    source = KubernetesReplicaSource(cfg)
    with pytest.raises(Exception, match="absent"):
        source._list(cfg.region("us-west-1"))
