"""drills.fault_injector: kubernetes: the region outage scales the track Deployment to 0 through
the Kubernetes API and the rollback restores it, and replica loss deletes a Pod that its ReplicaSet
replaces, against the dev stack's emulated cluster, whose node agent really stops and starts the
replicas."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client as k8s
from temporalio.client import Client

from drctl.chaos import actions
from drctl.chaos.validate import validate_experiment
from drctl.config.schema import FleetConfig, load_config
from drctl.models.drill import Verdict
from tests.support.config import tuned, write_config
from tests.support.devstack import apps_api
from tests.support.drills import EXPERIMENTS, run_drill, watched
from tests.support.regionproc import alive
from tests.support.wait import wait_until
from tests.support.workers import StartWorkers, admin, fast_config, weights

pytestmark = [pytest.mark.devstack]

REGION = "us-west-1"


@pytest.fixture
def kube_cfg(fleet_config: FleetConfig, fleet_config_path: Path, reset_fleet: None) -> FleetConfig:
    """The session stack's config with fault_injector kubernetes, beside it so relative paths hold."""
    data = yaml.safe_load(fleet_config_path.read_text())
    data["drills"]["fault_injector"] = "kubernetes"
    path = fleet_config_path.parent / "fleet-kube-injector.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_config(path)


def _pids(cfg: FleetConfig, deployment: str) -> list[int]:
    return [r["pid"] for r in admin(cfg, REGION, "/replicas") if r["deployment"] == deployment]


def _region_serves(cfg: FleetConfig) -> bool:
    body = {"model": cfg.workload.model, "prompt": "x", "max_tokens": 1}
    try:
        return (
            httpx.post(cfg.region(REGION).gateway_url + "/v1/completions", json=body, timeout=3).status_code
            == 200
        )
    except httpx.HTTPError:
        return False


def test_outage_scales_to_zero_and_rollback_restores(kube_cfg: FleetConfig) -> None:
    conf: dict[str, Any] = {"fleet_config": kube_cfg.source_path}
    rc = kube_cfg.region(REGION)
    name, ns = kube_cfg.workload.deployment_name("stable"), rc.kube.namespace
    apps = apps_api(rc.kube.api_url or "")
    before = _pids(kube_cfg, name)
    assert len(before) == rc.replicas and all(alive(p) for p in before)
    # Every shipped outage experiment is valid with this injector; the devstack-only ones are not.
    assert validate_experiment(EXPERIMENTS / "region-outage.json", kube_cfg, REGION).target_region == REGION

    out = actions.kill_region_replicas(REGION, configuration=conf)
    try:
        assert out["injected"] and out["affected"] == [f"{name}:{rc.replicas}->0"]
        dep: Any = apps.read_namespaced_deployment(name, ns)
        assert dep.spec.replicas == 0
        assert dep.metadata.annotations[actions.RESTORE_ANNOTATION] == str(rc.replicas)
        # The node agent stops the replicas for real, and its HPA leaves a Deployment at 0 alone.
        wait_until(
            lambda: _pids(kube_cfg, name) == [] and not any(alive(p) for p in before),
            timeout_s=20,
            what="replicas of a Deployment scaled to 0 stopped",
        )
        wait_until(lambda: not _region_serves(kube_cfg), timeout_s=10, what="the region stops serving")
        assert apps.read_namespaced_deployment(name, ns).spec.replicas == 0
        # Nothing left to hurt: a second outage says so instead of claiming an injection.
        with pytest.raises(actions.FaultNotInjected, match="already has 0 replicas"):
            actions.kill_region_replicas(REGION, configuration=conf)
    finally:
        cleared = actions.clear_faults(REGION, configuration=conf)
    assert cleared["restored"] == f"{name}:{rc.replicas}"
    dep = apps.read_namespaced_deployment(name, ns)
    assert dep.spec.replicas == rc.replicas
    assert actions.RESTORE_ANNOTATION not in (dep.metadata.annotations or {})
    wait_until(lambda: len(_pids(kube_cfg, name)) == rc.replicas, timeout_s=30, what="replicas started again")
    wait_until(lambda: _region_serves(kube_cfg), timeout_s=30, what="the region serves again")
    # A rollback with nothing recorded is a no-op, not a guess at the replica count.
    assert actions.clear_faults(REGION, configuration=conf)["restored"] is None


def test_replica_loss_deletes_a_pod_and_its_replicaset_replaces_it(kube_cfg: FleetConfig) -> None:
    conf: dict[str, Any] = {"fleet_config": kube_cfg.source_path}
    rc = kube_cfg.region(REGION)
    name, ns = kube_cfg.workload.deployment_name("stable"), rc.kube.namespace
    apps = apps_api(rc.kube.api_url or "")
    core = k8s.CoreV1Api(apps.api_client)
    selector = f"app={kube_cfg.workload.app},drctl.io/track=stable"

    def live_pods() -> dict[str, Any]:
        found = core.list_namespaced_pod(ns, label_selector=selector).items
        return {p.metadata.name: p for p in found if not p.metadata.deletion_timestamp}

    before = live_pods()
    pids = {r["pod"]: r["pid"] for r in admin(kube_cfg, REGION, "/replicas") if r["deployment"] == name}
    assert set(pids) == set(before) and len(before) == rc.replicas
    # Replica loss is valid with this injector (region degradation and gateway loss are not).
    assert validate_experiment(EXPERIMENTS / "replica-loss.json", kube_cfg, REGION).target_region == REGION

    out = actions.kill_replicas(REGION, count=1, configuration=conf)
    (victim,) = out["affected"]
    assert out["fault"] == "replica-loss" and victim == sorted(before)[0]
    wait_until(lambda: not alive(pids[victim]), timeout_s=10, what="the deleted pod's process to stop")

    def replaced() -> dict[str, Any]:
        now = live_pods()
        ready = [
            p
            for p in now.values()
            if {c.type: c.status for c in p.status.conditions or []}.get("Ready") == "True"
        ]
        status = apps.read_namespaced_deployment_status(name, ns).status
        back = len(ready) == rc.replicas and victim not in now and status.ready_replicas == rc.replicas
        return now if back else {}

    after = wait_until(replaced, timeout_s=30, what="a new ready pod in place of the deleted one")
    (new,) = set(after) - set(before)
    assert new.startswith(victim.rsplit("-", 1)[0] + "-")  # same ReplicaSet, a new name
    assert {r["pod"] for r in admin(kube_cfg, REGION, "/replicas") if r["deployment"] == name} == set(after)
    wait_until(lambda: _region_serves(kube_cfg), timeout_s=10, what="the region serves")
    assert admin(kube_cfg, REGION, "/faults")["replicas"] == []  # nothing was held down


@pytest.mark.slow
async def test_region_outage_drill_with_the_kubernetes_injector_passes(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig, fleet_config_path: Path
) -> None:
    """The drill end to end with drills.fault_injector: kubernetes: its fault and its rollback are
    Deployment writes through the emulated Kubernetes API, and the failover it causes meets the RTO."""
    fast = fast_config(fleet_config)
    fast = tuned(fast, "drills", fault_injector="kubernetes")
    cfg = await start_workers(cfg=load_config(write_config(fast, fleet_config_path.parent)))
    rc = cfg.region(REGION)
    name, ns = cfg.workload.deployment_name("stable"), rc.kube.namespace
    apps = apps_api(rc.kube.api_url or "")
    generation = apps.read_namespaced_deployment(name, ns).metadata.generation
    await watched(temporal_client, cfg)
    report = await run_drill(temporal_client, cfg, EXPERIMENTS / "region-outage.json")
    assert report.verdict is Verdict.PASS, report.reasons
    assert report.fault_injected and report.failover and report.failover.found
    assert report.measured_rto_s is not None and report.measured_rto_s < report.rto_target_s
    dep: Any = apps.read_namespaced_deployment(name, ns)
    # Scaled to 0 and back through the API (two spec changes); the devstack admin API held nothing.
    assert (dep.spec.replicas, dep.metadata.generation) == (rc.replicas, generation + 2)
    assert actions.RESTORE_ANNOTATION not in (dep.metadata.annotations or {})
    assert admin(cfg, REGION, "/faults")["replicas"] == []
    assert weights(cfg) == cfg.weights
