"""Verification that proves where traffic went, and a fleet behind bearer auth, on the dev stack.

- The dev stack's regional HAProxy gateways set `traffic.region_header` (http-response set-header);
  a config naming a header no gateway sets stands for gateways without that line: the failover
  then reports `unverified` and the CLI exits 1, although fleetsim's own X-Fleetsim-Region header
  is on every answer.
- A verify attempt lost to a hung worker is retried until the verify deadline.
- The stable Deployments get VLLM_API_KEY (fleetsim reads it as vLLM does), so every /v1 request
  needs the bearer token; the monitor probes the fleet healthy, a failover verifies, and the token
  is found in no workflow history and no log line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from kubernetes import client as k8s
from temporalio import activity
from temporalio.api.enums.v1 import TimeoutType
from temporalio.client import Client
from temporalio.worker import Worker

from drctl.client.monitor_view import live_status
from drctl.config.schema import FleetConfig, WorkloadAuth
from drctl.models.activity_io import VerifyInput, VerifyResult
from drctl.models.fleet_spec import FleetSpec
from drctl.models.health import ProbeStatus
from drctl.models.monitor import MonitorStatus
from drctl.providers.kube_objects import on_conflict
from drctl.providers.kubernetes import KubernetesPlatform
from drctl.worker import registry
from tests.support.cli import drctl
from tests.support.config import tuned, write_config
from tests.support.devstack import apps_api
from tests.support.wait import assert_eventually, wait_until
from tests.support.workers import StartWorkers, fast_config, start_failover, weights

pytestmark = [pytest.mark.slow, pytest.mark.devstack]

TOKEN_ENV = "DRCTL_TEST_FLEET_API_KEY"


def _with(cfg: FleetConfig, **traffic: Any) -> FleetConfig:
    return tuned(cfg, "traffic", **traffic)


async def test_dev_stack_gateways_name_the_region(fleet_config: FleetConfig, reset_fleet: None) -> None:
    async with httpx.AsyncClient(timeout=5) as http:
        for r in fleet_config.regions:
            resp = await http.post(
                f"{r.gateway_url}/v1/completions",
                json={"model": fleet_config.workload.model, "prompt": "x", "max_tokens": 1},
            )
            assert resp.headers[fleet_config.traffic.region_header] == r.name


async def test_gateway_without_the_header_gives_unverified_and_exit_1(
    start_workers: StartWorkers, fleet_config: FleetConfig, fleet_config_path: Path
) -> None:
    cfg = await start_workers(cfg=_with(fast_config(fleet_config), region_header="x-served-region"))
    async with httpx.AsyncClient(timeout=5) as http:
        seen = await http.post(
            f"{cfg.traffic.global_endpoint}/v1/completions",
            json={"model": cfg.workload.model, "prompt": "x", "max_tokens": 1},
        )
    assert (
        "x-served-region" not in seen.headers and seen.headers["X-Fleetsim-Region"]
    )  # the server's own is there
    path = write_config(cfg, fleet_config_path.parent)
    proc = await asyncio.to_thread(
        drctl, "failover", "--to", "us-east-1", "--yes", "-c", str(path), "-o", "json"
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    res = json.loads(proc.stdout)["result"]
    assert res["status"] == "unverified", res
    assert res["verify"]["unattributed"] == res["verify"]["ok"] == res["verify"]["total"]
    assert res["rto_s"] is None and "x-served-region" in res["error"]
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}  # the shift itself happened


async def test_lost_verify_attempt_is_retried_until_the_deadline(
    start_workers: StartWorkers, fleet_config: FleetConfig, temporal_client: Client
) -> None:
    base = fast_config(fleet_config)
    cfg = tuned(base, "failover", verify_timeout_s=40.0)
    await start_workers(regions=[], cfg=cfg)  # workflows and the main queue only
    acts = registry.activities(cfg)
    real = next(a for a in acts if getattr(a, "__name__", "") == "verify_global")
    calls: list[int] = []

    @activity.defn(name="verify_global")
    async def hangs_once(inp: VerifyInput) -> VerifyResult:
        calls.append(1)
        if len(calls) == 1:
            await asyncio.sleep(3600)  # a worker that took the attempt and froze: no heartbeat, no answer
        return await real(inp)

    acts = [a for a in acts if a is not real] + [hangs_once]
    with ThreadPoolExecutor(max_workers=8) as executor:
        worker = Worker(
            temporal_client,
            task_queue=cfg.region("us-east-1").queue,
            activities=acts,
            activity_executor=executor,
        )
        async with worker:
            handle = await start_failover(temporal_client, cfg, emergency=True)
            res = await asyncio.wait_for(handle.result(), 90)
    assert res.status == "succeeded", res.error
    assert len(calls) == 2 and res.verify is not None and res.verify.by_region == {"us-east-1": 10}
    # The frozen attempt was given up at its heartbeat timeout, not at the end of start-to-close.
    started = [
        e.activity_task_started_event_attributes
        for e in (await handle.fetch_history()).events
        if e.HasField("activity_task_started_event_attributes")
    ]
    [retried] = [a for a in started if a.attempt == 2]
    assert retried.last_failure.timeout_failure_info.timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT


# --- a fleet behind bearer auth ----------------------------------------------------------------


def _set_api_key(cfg: FleetConfig, key: str | None) -> None:
    """Put VLLM_API_KEY on (or take it off) every stable Deployment: a rolling restart follows."""
    for r in cfg.regions:
        apps = apps_api(r.kube.api_url or "")
        name, ns = cfg.workload.deployment_name("stable"), r.kube.namespace

        def put(apps: Any = apps, name: str = name, ns: str = ns) -> None:
            dep = apps.read_namespaced_deployment(name, ns)
            container = dep.spec.template.spec.containers[0]
            env = [e for e in container.env or [] if e.name != "VLLM_API_KEY"]
            if key is not None:
                env.append(k8s.V1EnvVar(name="VLLM_API_KEY", value=key))
            container.env = env
            apps.replace_namespaced_deployment(name, ns, dep)

        on_conflict(put)  # the node agent writes status meanwhile: a 409 reads again


def _anonymous_status(cfg: FleetConfig, seen: list[str] | None = None) -> set[int]:
    """The codes the stable replicas answer; `seen` gets each replica's pod, state and code."""
    codes, name = set(), cfg.workload.deployment_name("stable")
    for r in cfg.regions:
        # Only the stable Deployment gets the key: a replica of another track, or of another
        # Deployment an earlier test left behind (a migration's copy, a draining canary), answers
        # anonymously and is not what this fixture changed.
        for rep in httpx.get(f"{r.devstack_admin_url}/replicas", timeout=5).json():
            if (rep.get("track"), rep.get("deployment"), rep.get("namespace")) != (
                "stable",
                name,
                r.kube.namespace,
            ):
                continue
            try:
                code = httpx.get(f"http://127.0.0.1:{rep['port']}/v1/models", timeout=5).status_code
            except httpx.HTTPError:
                code = -1  # a replica of the rolling update still starting or already stopping
            codes.add(code)
            if seen is not None:
                seen.append(f"{r.name}/{rep['pod']} {rep['state']} port {rep['port']}: {code}")
    return codes


@pytest.fixture
def authed_fleet(
    fleet_config: FleetConfig, reset_fleet: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    key = f"sk-drctl-{uuid.uuid4().hex}"
    monkeypatch.setenv(TOKEN_ENV, key)
    _set_api_key(fleet_config, key)
    try:
        wait_until(
            lambda: _settled(fleet_config, {401}),
            timeout_s=60,
            interval_s=0.5,
            what="every replica restarted with an API key",
        )
        yield key
    finally:
        # Before reset_fleet's baseline check, which sends anonymous completions.
        _set_api_key(fleet_config, None)
        wait_until(
            lambda: _settled(fleet_config, {200}),
            timeout_s=60,
            interval_s=0.5,
            what="every replica back without an API key",
        )


def _authed(cfg: FleetConfig) -> FleetConfig:
    return tuned(cfg, "workload", auth=WorkloadAuth(token_env=TOKEN_ENV))


async def _monitor(client: Client, cfg: FleetConfig) -> Any:
    from drctl.cli.monitor import start_monitor

    handle, started = await start_monitor(client, cfg)
    assert started
    return handle


def _settled(cfg: FleetConfig, codes: set[int]) -> bool:
    """Every replica answers anonymous requests with `codes` and the rollout is done; else says what it saw."""
    seen: list[str] = []
    got, rolled = _anonymous_status(cfg, seen), _rolled(cfg)
    assert got == codes and rolled, (
        f"anonymous /v1/models answered {sorted(got)}, rolled out: {rolled}: {seen}"
    )
    return True


def _rolled(cfg: FleetConfig) -> bool:
    name = cfg.workload.deployment_name("stable")
    return all(KubernetesPlatform(r).get_deployment(name).rolled_out for r in cfg.regions)


@pytest_asyncio.fixture(loop_scope="session")
async def log_text() -> AsyncIterator[list[str]]:
    """Every log record of the worker and the Temporal SDK while the test runs."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler, root = Keep(level=logging.DEBUG), logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield lines
    root.removeHandler(handler)
    root.setLevel(old)


async def test_fleet_behind_bearer_auth_is_probed_healthy_and_the_token_stays_out_of_history(
    authed_fleet: str,
    start_workers: StartWorkers,
    fleet_config: FleetConfig,
    temporal_client: Client,
    log_text: list[str],
) -> None:
    cfg = await start_workers(cfg=_authed(fast_config(fleet_config)))
    spec = FleetSpec.from_config(cfg)
    monitor = await _monitor(temporal_client, cfg)

    async def probed_healthy() -> bool:
        st = await live_status(monitor)  # with the watcher, a healthy fleet's probes show in its heartbeat
        return all(t.last_status is ProbeStatus.HEALTHY for t in st.regions.values()) and st.alert is None

    await assert_eventually(
        probed_healthy, timeout_s=30, interval_s=0.5, what="monitor probes the authed fleet healthy"
    )
    failover = await start_failover(temporal_client, cfg, spec=spec)
    res = await asyncio.wait_for(failover.result(), 90)
    assert res.status == "succeeded", res.error
    assert (
        res.verify is not None and res.verify.by_region == {"us-east-1": 10} and not res.verify.auth_rejected
    )
    # The watcher's heartbeat (readable by any client) holds the probes' reasons: no token there either.
    watching = (await monitor.describe()).raw_description.pending_activities
    assert watching and authed_fleet not in str(watching)
    await monitor.terminate("test done")
    for handle in (monitor, failover):
        history = (await handle.fetch_history()).to_json()
        # A healthy watcher never returns: the monitor's history holds its input, the failover's results.
        assert "ActivityTaskScheduled" in history or "activityTaskScheduledEventAttributes" in history
        assert (
            handle is monitor
            or "activityTaskCompletedEventAttributes" in history
            or "ActivityTaskCompleted" in history
        )
        assert authed_fleet not in history, f"the token is in the history of {handle.id}"
    assert log_text and not [line for line in log_text if authed_fleet in line]


async def test_wrong_token_is_auth_and_alerts_without_failing_over(
    authed_fleet: str,
    start_workers: StartWorkers,
    fleet_config: FleetConfig,
    temporal_client: Client,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "sk-not-the-key")
    cfg = await start_workers(cfg=_authed(fast_config(fleet_config)))
    monitor = await _monitor(temporal_client, cfg)

    async def alerted() -> MonitorStatus | None:
        st = await monitor.query("status", result_type=MonitorStatus)
        return st if st.alert == "PROBE_AUTH_REFUSED" else None

    st = await assert_eventually(alerted, timeout_s=30, interval_s=0.5, what="PROBE_AUTH_REFUSED alert")
    # Several rounds later: still no failover, and the regions keep their state.
    await asyncio.sleep(3 * cfg.health.interval_s)
    st = await monitor.query("status", result_type=MonitorStatus)
    assert st.last_failover is None and st.active_failover is None
    assert all(t.last_status is ProbeStatus.AUTH and t.state.value == "HEALTHY" for t in st.regions.values())
    assert weights(cfg) == cfg.weights
    await monitor.terminate("test done")
