"""The Kubernetes fault injector (drills.fault_injector: kubernetes) against the emulated API server
in-process: the outage scales the track to 0 and records the count and the owning drill, the
rollback restores exactly that, replica loss deletes pods by name order, and `owners` reads who
holds a fault. tests/drills/test_kube_injector.py runs the same path on the dev stack end to end."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from drctl import chaos
from drctl.chaos import actions, faults
from drctl.devstack.kube import RegionCluster
from tests.support.config import fleet_config_data
from tests.support.loop_thread import LoopThread

NS = "inference"
WEST = "us-west-1"


@pytest.fixture(scope="module")
def api_url() -> Iterator[str]:
    lt = LoopThread()
    _, url = lt.serve_cluster(RegionCluster)
    yield url
    lt.close()


@pytest.fixture(scope="module")
def conf(api_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    data = fleet_config_data()
    for r in data["regions"]:
        # One emulated API; the other region in a namespace of its own (no two regions may share both).
        r["kube"] = {"api_url": api_url, "namespace": NS if r["name"] == WEST else f"{NS}-{r['name']}"}
    data["drills"] = {"allowed_targets": [WEST], "fault_injector": "kubernetes"}
    path = tmp_path_factory.mktemp("kube") / "fleet-kube.yaml"
    path.write_text(yaml.safe_dump(data))
    return {"fleet_config": str(path), "drill_id": "drill/test/7"}


@pytest.fixture
def apps(api_url: str) -> Iterator[client.AppsV1Api]:
    with client.ApiClient(client.Configuration(host=api_url)) as api:
        yield client.AppsV1Api(api)


def _deployment(
    apps: client.AppsV1Api, track: str, replicas: int, annotations: dict[str, str] | None = None
) -> None:
    name = f"llm-{track}"
    labels = {"app": "llm", "drctl.io/track": track}
    body = {
        "metadata": {"name": name, "labels": labels, "annotations": annotations or {}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "server", "image": "vllm:1"}]},
            },
        },
    }
    try:
        apps.delete_namespaced_deployment(name, NS)
    except client.ApiException as exc:
        assert exc.status == 404
    apps.create_namespaced_deployment(NS, body)


def _delete(apps: client.AppsV1Api, name: str) -> None:
    try:
        apps.delete_namespaced_deployment(name, NS)
    except client.ApiException as exc:
        assert exc.status == 404


def _read(apps: client.AppsV1Api, name: str = "llm-stable") -> tuple[int, dict[str, str]]:
    dep = apps.read_namespaced_deployment(name, NS)
    return int(dep.spec.replicas), {
        k: v for k, v in (dep.metadata.annotations or {}).items() if v is not None
    }


def test_outage_scales_to_zero_and_the_rollback_restores_the_count(
    conf: dict[str, Any], apps: client.AppsV1Api
) -> None:
    _deployment(apps, "stable", 3, {"team": "ml"})
    _delete(apps, "llm-canary")
    out = actions.kill_region_replicas(WEST, configuration=conf)
    assert (
        out["injected"] is True and out["fault"] == "region-outage" and out["affected"] == ["llm-stable:3->0"]
    )
    assert out["region"] == WEST
    assert _read(apps) == (
        0,
        {"team": "ml", faults.RESTORE_ANNOTATION: "3", faults.OWNER_ANNOTATION: "drill/test/7"},
    )
    cfg = chaos.fleet(conf)
    assert faults.owners(cfg, WEST) == {"drill/test/7"}
    with pytest.raises(actions.FaultNotInjected) as info:
        actions.kill_region_replicas(WEST, configuration=conf)
    assert str(info.value) == "deployment inference/llm-stable in us-west-1 already has 0 replicas"
    cleared = actions.clear_faults(WEST, configuration=conf)
    assert cleared["cleared"] is True and cleared["region"] == WEST and cleared["restored"] == "llm-stable:3"
    assert cleared["at"].startswith("20")
    assert _read(apps) == (3, {"team": "ml"})
    assert faults.owners(cfg, WEST) == set()
    # Nothing held: nothing restored.
    assert faults.clear_region(cfg, WEST)["restored"] is None


def test_a_second_outage_keeps_the_first_count_and_an_unowned_fault_reads_as_nobodys(
    conf: dict[str, Any], apps: client.AppsV1Api
) -> None:
    _deployment(apps, "stable", 2, {faults.RESTORE_ANNOTATION: "5"})
    _delete(apps, "llm-canary")
    cfg = chaos.fleet(conf)
    assert faults.owners(cfg, WEST) == {""}
    anonymous = {"fleet_config": conf["fleet_config"]}
    assert actions.kill_region_replicas(WEST, configuration=anonymous)["affected"] == ["llm-stable:2->0"]
    assert _read(apps) == (0, {faults.RESTORE_ANNOTATION: "5"})
    # A canary held by another drill is found and restored too.
    _deployment(apps, "canary", 0, {faults.RESTORE_ANNOTATION: "1", faults.OWNER_ANNOTATION: "drill/other"})
    assert faults.owners(cfg, WEST) == {"", "drill/other"}
    out = faults.clear_region(cfg, WEST)
    assert out["restored"] == "llm-stable:5,llm-canary:1"
    assert _read(apps) == (5, {}) and _read(apps, "llm-canary") == (1, {})
    # The rollback of one track leaves the other alone.
    _deployment(apps, "canary", 0, {faults.RESTORE_ANNOTATION: "2"})
    assert actions.clear_faults(WEST, track="stable", configuration=conf)["restored"] is None
    assert _read(apps, "llm-canary") == (0, {faults.RESTORE_ANNOTATION: "2"})
    assert actions.clear_faults(WEST, track="canary", configuration=conf)["restored"] == "llm-canary:2"
    # A track that holds nothing does not end the sweep: the next one is still restored.
    _deployment(apps, "canary", 0, {faults.RESTORE_ANNOTATION: "3"})
    assert faults.clear_region(cfg, WEST)["restored"] == "llm-canary:3"


def test_replica_loss_deletes_pods_in_name_order(conf: dict[str, Any], api_url: str) -> None:
    with client.ApiClient(client.Configuration(host=api_url)) as api:
        core = client.CoreV1Api(api)
        for name, track in [("p-c", "stable"), ("p-a", "stable"), ("p-b", "stable"), ("p-x", "canary")]:
            labels = {"app": "llm", "drctl.io/track": track}
            core.create_namespaced_pod(
                NS,
                {
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"containers": [{"name": "s", "image": "vllm:1"}]},
                },
            )
        out = actions.kill_replicas(WEST, count=2, configuration=conf)
        assert out["fault"] == "replica-loss" and out["affected"] == ["p-a", "p-b"]
        left = sorted(p.metadata.name for p in core.list_namespaced_pod(NS).items)
        assert left == ["p-c", "p-x"]
        assert actions.kill_replicas(WEST, count=5, track="canary", configuration=conf)["affected"] == ["p-x"]
        with pytest.raises(actions.FaultNotInjected) as info:
            actions.kill_replicas(WEST, track="canary", configuration=conf)
        assert str(info.value) == "replica-loss in us-west-1: nothing matched, nothing was hurt"
        core.delete_namespaced_pod("p-c", NS)


def test_a_missing_deployment_holds_no_fault(conf: dict[str, Any], apps: client.AppsV1Api) -> None:
    _delete(apps, "llm-stable")
    _delete(apps, "llm-canary")
    cfg = chaos.fleet(conf)
    assert faults.owners(cfg, WEST) == set()
    out = faults.clear_region(cfg, WEST)
    assert out.pop("at").startswith("20")
    assert out == {"cleared": True, "region": WEST, "restored": None}
