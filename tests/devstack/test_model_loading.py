"""A dev-stack region's replicas load their model before they serve, as vLLM's do (issue 27).

One real region process: its node agent starts fleetsim with `devstack.model_load_s`, the port
stays closed meanwhile, the pod and its EndpointSlice endpoint are not ready, and drctl's prober
(through the region's own EndpointSlices and gateway) reports the replica as loading while the
region stays HEALTHY.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s

from drctl.config.schema import DevStackConfig
from drctl.models.health import ProbeStatus
from drctl.providers.probe import InferenceProber
from tests.support.config import short_tmp_dir, write_fleet_config
from tests.support.ports import listening
from tests.support.regionproc import RegionProcess
from tests.support.wait import wait_until

REGION, DEPLOYMENT = "us-west-1", "llm-stable"
LOAD_S = 8  # long enough to see the loading replica through a few probe rounds on a busy machine


@pytest.fixture(scope="module")
def region() -> Iterator[RegionProcess]:
    directory = short_tmp_dir()
    try:
        config = write_fleet_config(directory, {"devstack": {"model_load_s": LOAD_S}})
        with RegionProcess(config, REGION, start_timeout_s=30 + LOAD_S) as rp:
            yield rp
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_the_dev_stack_loads_for_a_few_seconds_by_default() -> None:
    assert 0 < DevStackConfig().model_load_s <= 10


def test_a_replica_loading_is_not_ready_and_probed_as_loading(region: RegionProcess) -> None:
    conf = k8s.Configuration()
    conf.host = region.region_cfg.kube.api_url
    ns = region.region_cfg.kube.namespace
    with k8s.ApiClient(conf) as api:
        apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
        before = {r["pod"] for r in region.admin.get("/replicas").json()}
        apps.patch_namespaced_deployment_scale(DEPLOYMENT, ns, {"spec": {"replicas": 3}})
        try:
            new = wait_until(
                lambda: next(
                    (r for r in region.admin.get("/replicas").json() if r["pod"] not in before), None
                ),
                timeout_s=15,
                what="a third replica started",
            )
            log = region.cfg.state_dir() / "logs" / f"fleetsim-{REGION}-{new['pod']}.log"
            wait_until(log.exists, timeout_s=10, what="the new replica's log")
            wait_until(
                lambda: f"loading fleetsim-tiny for {LOAD_S}s" in log.read_text(),
                timeout_s=10,
                what="the replica loading",
            )
            # Loading: the port refuses connections, the pod is not ready, and the probe says so.
            assert not listening(new["port"])
            pod = core.read_namespaced_pod(new["pod"], ns)
            ready = {c.type: c.status for c in pod.status.conditions or []}.get("Ready")
            assert ready == "False", pod.status.conditions
            probe = asyncio.run(InferenceProber(region.cfg).probe_region(REGION))
            if listening(new["port"]):  # the machine was slow enough for the load to end meanwhile
                pytest.skip("the replica finished loading before the probe ran")
            assert probe.loading == [new["pod"]], probe
            assert probe.status == ProbeStatus.HEALTHY and probe.failing_fraction == 0, probe.reason
            # Then it serves: ready in the API, probed as a replica.
            wait_until(
                lambda: (
                    (apps.read_namespaced_deployment_status(DEPLOYMENT, ns).status.ready_replicas or 0) == 3
                ),
                timeout_s=LOAD_S + 20,
                what="3 ready replicas",
            )
            probe = asyncio.run(InferenceProber(region.cfg).probe_region(REGION))
            assert probe.loading == [] and len(probe.replicas) == 3, probe
        finally:
            apps.patch_namespaced_deployment_scale(DEPLOYMENT, ns, {"spec": {"replicas": 2}})
