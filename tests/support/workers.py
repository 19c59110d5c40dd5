"""drctl's real workers, in-process, against the session dev stack (the `start_workers` fixture,
registered by the conftests that use it), and what the workflow tests read from the fleet.

Every test gets fresh task queues (uuid), so a worker left from another test never picks up its
tasks, and a test can choose which region workers exist (static-stability tests leave one out).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest_asyncio
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from drctl.client.monitor_view import live_status
from drctl.client.operations import start_operation
from drctl.config.schema import FleetConfig
from drctl.devstack import worker_credentials
from drctl.models.failover import FailbackInput, FailoverInput, FailoverResult
from drctl.models.fleet_spec import FleetSpec
from drctl.models.health import RegionState
from drctl.models.monitor import MonitorStatus
from drctl.providers.kubernetes import KubernetesPlatform
from drctl.providers.traffic_factory import global_traffic
from drctl.worker.process import run_worker
from tests.support.cli import drctl
from tests.support.config import write_config
from tests.support.loop_thread import LoopThread
from tests.support.wait import assert_eventually
from workflows.failback import Failback
from workflows.failover import Failover

StartWorkers = Callable[..., Awaitable[FleetConfig]]


def fast_config(cfg: FleetConfig, failback_window_s: float = 3.0, **health: Any) -> FleetConfig:
    """The test fleet with short probe intervals and windows, and fresh task queues; the monitor
    fails back once the source has been HEALTHY for `failback_window_s`."""
    tag = uuid.uuid4().hex[:8]
    h = {
        "interval_s": 2.0,
        # 1.5 s, not 1: on a loaded 2-core CI machine running two dev stacks, a healthy gateway
        # has been seen to take over 1 s for one of a probe's four completions.
        "probe_timeout_s": 1.5,
        "fast_confirm_interval_s": 0.5,
        "failure_threshold": 3,
        "recovery_threshold": 2,
        **health,
    }
    return cfg.model_copy(
        update={
            "temporal": cfg.temporal.model_copy(update={"task_queue": f"drctl-test-{tag}"}),
            "regions": [
                r.model_copy(update={"task_queue": f"drctl-test-{tag}-{r.name}"}) for r in cfg.regions
            ],
            "health": cfg.health.model_copy(update=h),
            "failover": cfg.failover.model_copy(
                update={"verify_requests": 10, "verify_timeout_s": 10.0, "rollout_timeout_s": 60.0}
            ),
            # A failover waits for "SLO restored" held this long (an idle target: this long, once).
            "objectives": cfg.objectives.model_copy(
                update={"slo": cfg.objectives.slo.model_copy(update={"window_s": 2.0})}
            ),
            "failback": cfg.failback.model_copy(
                update={"stabilization_window_s": failback_window_s, "steps": 2, "step_interval_s": 1.0}
            ),
        }
    )


@pytest_asyncio.fixture(loop_scope="session")
async def start_workers(
    temporal_client: Client, fleet_config: FleetConfig, reset_fleet: None
) -> AsyncIterator[StartWorkers]:
    """`await start_workers(regions=None, cfg=None, failback_window_s=3.0, **health)` → the FleetConfig
    the workers serve."""
    stops: list[tuple[asyncio.Event, asyncio.Task[None]]] = []

    async def start(
        regions: list[str] | None = None,
        cfg: FleetConfig | None = None,
        failback_window_s: float = 3.0,
        **health: Any,
    ) -> FleetConfig:
        cfg = cfg or fast_config(fleet_config, failback_window_s, **health)
        stop = asyncio.Event()
        task = asyncio.create_task(run_worker(cfg, regions, client=temporal_client, stop=stop))
        stops.append((stop, task))
        return cfg

    with temporary_keys(fleet_config):
        yield start
        for stop, _task in stops:
            stop.set()
        for _stop, task in stops:
            await asyncio.wait_for(task, 30)
    await terminate_fleet_workflows(temporal_client, fleet_config)


@contextmanager
def temporary_keys(cfg: FleetConfig) -> Iterator[None]:
    """While in-process workers run, boto3's chain in this process yields temporary keys from the
    dev stack's STS, as `drctl dev up`'s workers and production workers hold: the stack's SigV4
    checker then refuses any drctl path that drops the session token (403 InvalidAccessKeyId)."""
    fresh = worker_credentials.worker_env(cfg, f"drctl-test-{uuid.uuid4().hex[:8]}")
    saved = {k: os.environ.get(k) for k in fresh}
    os.environ.update(fresh)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


async def terminate_fleet_workflows(client: Client, cfg: FleetConfig) -> None:
    """Nothing of one test may keep running into the next (a monitor would fail over again)."""
    async for ex in client.list_workflows(f"DrctlFleet = '{cfg.name}' AND ExecutionStatus = 'Running'"):
        try:
            await client.get_workflow_handle(ex.id, run_id=ex.run_id).terminate("test teardown")
        except RPCError as exc:
            # Visibility lags: a run listed as running may have ended since (an objective watch).
            if exc.status is not RPCStatusCode.NOT_FOUND:
                raise


async def start_failover(
    client: Client, cfg: FleetConfig, target: str = "us-east-1", spec: FleetSpec | None = None, **options: Any
) -> WorkflowHandle[Any, Any]:
    """A failover of cfg's fleet to `target`, started the way `drctl failover --to` starts it."""
    return await start_operation(
        client,
        cfg,
        Failover.run,
        FailoverInput(spec=spec or FleetSpec.from_config(cfg), target=target, **options),
        operation="failover",
        workflow_id=f"failover/{cfg.name}",
        target=target,
    )


async def start_failback(client: Client, cfg: FleetConfig) -> WorkflowHandle[Any, Any]:
    """A failback of cfg's fleet, started the way `drctl failback` starts it."""
    spec = FleetSpec.from_config(cfg)
    wid = f"failback/{cfg.name}"
    return await start_operation(
        client, cfg, Failback.run, FailbackInput(spec=spec), operation="failback", workflow_id=wid
    )


def weights(cfg: FleetConfig) -> dict[str, int]:
    return global_traffic(cfg).get_weights()


def replicas(cfg: FleetConfig, region: str) -> int:
    """spec.replicas of the stable Deployment in `region`, read from its cluster."""
    return (
        KubernetesPlatform(cfg.region(region)).get_deployment(cfg.workload.deployment_name("stable")).replicas
    )


async def monitor_handle(client: Client, cfg: FleetConfig) -> WorkflowHandle[Any, Any]:
    """Start the fleet's monitor the way `drctl monitor start` does; its handle."""
    from drctl.cli.monitor import start_monitor

    handle, started = await start_monitor(client, cfg)
    assert started
    return handle


async def monitor_status(handle: WorkflowHandle[Any, Any]) -> MonitorStatus:
    """The live view (`drctl monitor status`'s): with the watcher, its heartbeat's trackers and rounds."""
    return await live_status(handle)


async def healthy_rounds(handle: WorkflowHandle[Any, Any], n: int = 2) -> bool:
    """The monitor has probed n rounds and sees every region HEALTHY."""
    st = await monitor_status(handle)
    return st.probe_rounds >= n and all(r.state is RegionState.HEALTHY for r in st.regions.values())


async def until_healthy(handle: WorkflowHandle[Any, Any]) -> None:
    """Wait until the monitor has probed two rounds and sees every region HEALTHY."""
    await assert_eventually(
        lambda: healthy_rounds(handle), timeout_s=30, what="monitor sees both regions healthy"
    )


async def healthy_fleet(
    start_workers: StartWorkers, client: Client
) -> tuple[FleetConfig, WorkflowHandle[Any, Any]]:
    """Workers for the test fleet, and its monitor once it sees every region HEALTHY."""
    cfg = await start_workers()
    mon = await monitor_handle(client, cfg)
    await until_healthy(mon)
    return cfg, mon


async def served_by(cfg: FleetConfig, n: int = 20) -> dict[str, int]:
    """Regions serving n completions through the global endpoint (new connection each)."""
    counts: dict[str, int] = {}
    limits = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=5, limits=limits) as client:
        for _ in range(n):
            try:
                r = await client.post(
                    cfg.traffic.global_endpoint + "/v1/completions",
                    json={"model": cfg.workload.model, "prompt": "x", "max_tokens": 1},
                )
                key = served_key(r)
            except httpx.HTTPError as exc:
                key = type(exc).__name__
            counts[key] = counts.get(key, 0) + 1
    return counts


def served_key(r: httpx.Response) -> str:
    """The region that served a completion (fleetsim's header), or its HTTP status when it failed."""
    return r.headers.get("X-Fleetsim-Region", "?") if r.status_code == 200 else f"HTTP {r.status_code}"


async def refused_cli_failover(start_workers: StartWorkers, directory: Path) -> tuple[FleetConfig, Path, Any]:
    """`drctl failover --to us-east-1` (the real binary) while us-east-1 answers no inference: it is
    refused in preflight and exits 1. The FleetConfig, its file and the finished process."""
    cfg = await start_workers()
    path = write_config(cfg, directory)
    admin(cfg, "us-east-1", "/faults/inference", {"down": True})
    proc = await asyncio.to_thread(drctl, "failover", "--to", "us-east-1", "--yes", "-c", str(path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    return cfg, path, proc


def admin(cfg: FleetConfig, region: str, path: str, body: dict[str, Any] | None = None) -> Any:
    url = (cfg.region(region).devstack_admin_url or "").rstrip("/") + path
    r = (
        httpx.post(url, json=body, timeout=10)
        if body is not None or path.endswith("clear")
        else httpx.get(url, timeout=10)
    )
    r.raise_for_status()
    return r.json() if r.content else None


@contextmanager
def background_workers(cfg: FleetConfig) -> Iterator[None]:
    """drctl's workers for `cfg` (every region) on a thread of their own, for a synchronous test
    whose CLI reads go through them."""
    with temporary_keys(cfg):
        lt = LoopThread()
        stop = asyncio.Event()
        done = asyncio.run_coroutine_threadsafe(run_worker(cfg, stop=stop), lt.loop)
        try:
            yield
        finally:
            lt.loop.call_soon_threadsafe(stop.set)
            done.result(timeout=30)
            lt.close()


def kill_stable(cfg: FleetConfig, region: str) -> Any:
    """A region outage: the node agent kills `region`'s stable replicas and keeps them down."""
    return admin(cfg, region, "/faults/replicas", {"action": "kill", "track": "stable", "stay_down": True})


async def monitor_failed_over(
    mon: WorkflowHandle[Any, Any], timeout_s: float, what: str, interval_s: float = 0.5
) -> MonitorStatus:
    """The monitor's status once it records a failover (bounded: fails after `timeout_s`)."""

    async def failed_over() -> MonitorStatus | None:
        st = await monitor_status(mon)
        return st if st.failed_over else None

    return await assert_eventually(failed_over, timeout_s=timeout_s, interval_s=interval_s, what=what)


async def outage_failover(
    client: Client, cfg: FleetConfig, mon: WorkflowHandle[Any, Any], what: str
) -> FailoverResult:
    """Kill us-west-1's stable replicas; the result of the failover the monitor starts for it."""
    assert kill_stable(cfg, "us-west-1")["affected"]
    await monitor_failed_over(mon, timeout_s=60, what=what)
    return await client.get_workflow_handle(f"failover/{cfg.name}", result_type=FailoverResult).result()
