"""The session dev stack: one test fleet config and one real dev stack for the whole run, and the
helpers that read its clusters and put it back to baseline after a test.

The fixtures are registered by tests/conftest.py. Their names are a contract other test modules rely
on: fleet_config_path, fleet_config, dev_stack, temporal_client, reset_fleet.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from kubernetes import client as k8s
from temporalio.client import Client

from drctl.client.connection import connect
from drctl.config.schema import TRACKS, FleetConfig, load_config
from drctl.devstack import readiness, stack
from drctl.providers.haproxy_runtime import HAProxyRuntime
from tests.support.config import write_fleet_config
from tests.support.wait import wait_until


@pytest.fixture(scope="session")
def fleet_config_path() -> Iterator[Path]:
    path = write_fleet_config()
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def fleet_config(fleet_config_path: Path) -> FleetConfig:
    return load_config(fleet_config_path)


@pytest.fixture(scope="session")
def dev_stack(
    request: pytest.FixtureRequest, fleet_config: FleetConfig, fleet_config_path: Path
) -> Iterator[stack.StackInfo]:
    # A missing HAProxy must fail the run loudly, never skip: the stack is the product's test bed.
    if not (shutil.which("haproxy") or Path("/usr/sbin/haproxy").exists()):
        pytest.fail("haproxy is not installed (Debian: apt-get install haproxy); the dev stack needs it")
    try:
        info = stack.up(fleet_config, fleet_config_path)
    except stack.StackError as exc:
        stack.down(fleet_config)
        pytest.fail(f"dev stack did not come up: {exc}\n--- {exc.component} log ---\n{exc.log}")
    try:
        yield info
    finally:
        if request.session.testsfailed:
            _keep_logs(fleet_config)
        stack.down(fleet_config)


def _keep_logs(cfg: FleetConfig) -> None:
    """After a failed test, the stack's process logs outlive its teardown (CI reads them)."""
    logs = stack.state_dir(cfg) / "logs"
    keep = Path(
        tempfile.mkdtemp(
            prefix=f"drctl-test-logs-{os.environ.get('PYTEST_XDIST_WORKER', 'gw0')}-", dir="/tmp"
        )
    )
    shutil.copytree(logs, keep / "logs", dirs_exist_ok=True)
    print(f"\ndev-stack logs kept in {keep}/logs", file=sys.stderr)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def temporal_client(fleet_config: FleetConfig, dev_stack: stack.StackInfo) -> Client:
    return await connect(fleet_config)


def apps_api(api_url: str) -> k8s.AppsV1Api:
    """An AppsV1Api for one emulated cluster (no kubeconfig: the dev stack's API is plain HTTP)."""
    conf = k8s.Configuration()
    conf.host = api_url
    return k8s.AppsV1Api(k8s.ApiClient(conf))


def _drop_load_override(apps: Any, name: str, ns: str) -> None:
    """A test's upgrade may leave FLEETSIM_LOAD_S in the stable template (a blue-green makes the new
    track stable, env and all): every later replica of that region would load that long. Drop it, so
    the region's replicas load in the dev stack's own model_load_s again."""
    dep = apps.read_namespaced_deployment(name, ns)
    changed = False
    for c in dep.spec.template.spec.containers:
        kept = [e for e in c.env or [] if e.name != "FLEETSIM_LOAD_S"]
        if len(kept) != len(c.env or []):
            c.env, changed = kept, True
    if changed:
        apps.replace_namespaced_deployment(name, ns, dep)


def restore_baseline(cfg: FleetConfig, timeout_s: float = 60.0) -> None:
    """Return the dev-stack fleet to its configured state and wait until every region serves."""
    for r in cfg.regions:
        if r.devstack_admin_url:
            httpx.post(f"{r.devstack_admin_url.rstrip('/')}/faults/clear", timeout=10).raise_for_status()
    g = cfg.traffic.global_tier
    if g.kind == "haproxy":
        runtime = HAProxyRuntime(g.runtime_socket)
        for r in cfg.regions:
            runtime.set_weight(g.backend, r.name, r.weight)
    regional_backend = getattr(cfg.traffic.regional_tier, "backend", "region")
    app = cfg.workload.app
    for r in cfg.regions:
        if r.gateway_runtime_socket:
            gw = HAProxyRuntime(r.gateway_runtime_socket)
            for track in TRACKS:
                gw.set_weight(regional_backend, track, 100 if track == "stable" else 0)
        apps = apps_api(r.kube.api_url or "")
        ns = r.kube.namespace
        # The node agent enforces HPA minReplicas (as the HPA controller would), and a failover's
        # pre-scale raises it: lower it first or the Deployment bounces back up.
        k8s.AutoscalingV2Api(apps.api_client).patch_namespaced_horizontal_pod_autoscaler(
            f"{app}-stable", ns, {"spec": {"minReplicas": r.replicas}}
        )
        apps.patch_namespaced_deployment_scale(f"{app}-stable", ns, {"spec": {"replicas": r.replicas}})
        _drop_load_override(apps, f"{app}-stable", ns)
        for d in apps.list_namespaced_deployment(ns).items:
            if d.metadata.name.startswith(f"{app}-") and d.metadata.name != f"{app}-stable":
                apps.delete_namespaced_deployment(d.metadata.name, ns)
    for r in cfg.regions:
        wait_until(
            lambda r=r: readiness.region_ready(r, cfg) is None,
            timeout_s=timeout_s,
            interval_s=0.25,
            what=f"{r.name} back at baseline and serving",
        )
    wait_until(
        lambda: readiness.answers_completion(cfg.traffic.global_endpoint, cfg) is None,
        timeout_s=timeout_s,
        interval_s=0.25,
        what="global endpoint serving",
    )


@pytest.fixture
def reset_fleet(fleet_config: FleetConfig, dev_stack: stack.StackInfo) -> Iterator[None]:
    """Opt-in: after the test, put faults, weights, replicas and track Deployments back to baseline."""
    yield
    restore_baseline(fleet_config)
