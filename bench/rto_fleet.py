"""The RTO benchmark's own fleet: a private dev stack on free ports, its worker, resets and faults.

The bench never shares a stack: it writes a config with free loopback ports into a fresh /tmp dir
(the tests' approach, copied because the bench must not import tests/), brings that stack up and
tears it down. Faults go through the region admin API of docs/devstack.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import yaml
from temporalio.client import Client
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

from bench.rto_report import Kind
from drctl.client.connection import connect
from drctl.client.operations import running_operations
from drctl.config.schema import FleetConfig, load_config
from drctl.devstack import readiness, stack
from drctl.models.health import ProbeStatus
from drctl.providers.kubernetes import MERGE, KubernetesPlatform
from drctl.providers.probe import InferenceProber
from drctl.providers.traffic_factory import global_traffic
from drctl.worker.process import run_worker

SLOW_FACTOR = 20  # the degraded fault: TTFT x20
ERROR_RATE = 0.5  # the other degraded fault: 50 % errors


class WorkerStopped(RuntimeError):
    """The in-process worker ended (Ctrl-C reaches it first: run_worker owns SIGINT)."""


def _free_ports(n: int) -> list[int]:
    """n free loopback ports above the kernel's ephemeral range (32768-60999), so no outbound
    connection takes one between this check and the stack binding it (bind port 0 would)."""
    rng = random.SystemRandom()
    ports: list[int] = []
    for _ in range(50 * n):  # bounded: a busy machine fails loudly instead of spinning
        p = rng.randint(61000, 65535)
        if p in ports:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                continue
        ports.append(p)
        if len(ports) == n:
            return ports
    raise RuntimeError(f"no {n} free ports found in 61000-65535")


def loopback_services(temporal: int, ui: int, moto: int, glob: int, **temporal_extra: str) -> dict[str, Any]:
    """The traffic, Temporal and AWS sections of a dev-stack fleet on these loopback ports: HAProxy's
    gateways, the Temporal dev server and moto. The tests' fleet (tests/support/config.py) uses it too."""
    return {
        "traffic": {
            "global_endpoint": f"http://127.0.0.1:{glob}",
            "global": {"kind": "haproxy", "runtime_socket": "s/haproxy/global.sock"},
            "regional": {"kind": "haproxy"},
        },
        "temporal": {
            "address": f"127.0.0.1:{temporal}",
            "ui_url": f"http://127.0.0.1:{ui}",
            **temporal_extra,
        },
        "aws": {"region": "us-east-1", "endpoint_url": f"http://127.0.0.1:{moto}"},
    }


def write_bench_config(interval_s: float, threshold: int, replicas: int = 2) -> Path:
    """fleet.yaml for the reference fleet (us-west-1 60 / us-east-1 40) on free ports in a short /tmp dir.

    The dir is short because HAProxy's runtime sockets live in it and unix socket paths are
    limited to ~100 characters.
    """
    directory = Path(tempfile.mkdtemp(prefix="drctl-bench-", dir="/tmp"))
    temporal, ui, moto, glob, stats, prom, *rp = _free_ports(12)
    regions = [
        {
            "name": name,
            "weight": weight,
            "replicas": replicas,
            "max_replicas": max(8, 2 * replicas),
            "gateway_url": f"http://127.0.0.1:{rp[i * 3]}",
            "gateway_runtime_socket": f"s/haproxy/{name}.sock",
            "devstack_admin_url": f"http://127.0.0.1:{rp[i * 3 + 2]}",
            "kube": {"api_url": f"http://127.0.0.1:{rp[i * 3 + 1]}"},
        }
        for i, (name, weight) in enumerate([("us-west-1", 60), ("us-east-1", 40)])
    ]
    data: dict[str, Any] = {
        "name": "bench",
        "regions": regions,
        "health": {"interval_s": interval_s, "failure_threshold": threshold},
        **loopback_services(temporal, ui, moto, glob, task_queue="drctl-bench"),
        # The bench's worker runs in-process with no HTTP endpoint; its stack's Prometheus on a free port.
        "worker": {"http_port": 0},
        "devstack": {"state_dir": "s", "stats_port": stats, "prometheus_port": prom},
    }
    path = directory / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def load(path: Path) -> FleetConfig:
    return load_config(path)


def _wait(check: Callable[[], str | None], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while (reason := check()) is not None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached after {timeout_s:g}s: {reason}")
        time.sleep(0.25)


def _admin(cfg: FleetConfig, region: str, path: str, body: dict[str, Any] | None = None) -> Any:
    url = (cfg.region(region).devstack_admin_url or "").rstrip("/") + path
    r = httpx.post(url, json=body, timeout=10)
    r.raise_for_status()
    return r.json() if r.content else None


def set_base_ttft(cfg: FleetConfig, ttft_ms: float, timeout_s: float = 120.0) -> None:
    """Give every stable replica a realistic steady-state TTFT (fleetsim defaults to 30 ms).

    With 30 ms, TTFT x20 is 600 ms: below the default degraded threshold (2 s), so the slow fault
    would test nothing. A merge patch replaces the whole containers list, hence read-modify-write.
    """
    name = cfg.workload.deployment_name("stable")
    for r in cfg.regions:
        k8s = KubernetesPlatform(r)
        try:
            dep: Any = k8s.apps.read_namespaced_deployment(name, r.kube.namespace)
            containers = k8s.api_client.sanitize_for_serialization(dep.spec.template.spec.containers)
            env = [e for e in containers[0].get("env") or [] if e.get("name") != "FLEETSIM_TTFT_MS"]
            containers[0]["env"] = [*env, {"name": "FLEETSIM_TTFT_MS", "value": f"{ttft_ms:g}"}]
            k8s.apps.patch_namespaced_deployment(
                name,
                r.kube.namespace,
                {"spec": {"template": {"spec": {"containers": containers}}}},
                _content_type=MERGE,
            )
            k8s.wait_rollout(name, timeout_s)
        finally:
            k8s.close()


def stack_up(cfg: FleetConfig, cfg_path: Path, base_ttft_ms: float) -> None:
    stack.up(cfg, cfg_path)
    set_base_ttft(cfg, base_ttft_ms)


def stack_down(cfg: FleetConfig) -> None:
    stack.down(cfg)


def reset_fleet(cfg: FleetConfig, timeout_s: float = 120.0) -> None:
    """Faults cleared, configured global weights, stable replicas back to configured, all serving."""
    for r in cfg.regions:
        _admin(cfg, r.name, "/faults/clear")
    global_traffic(cfg).set_weights(cfg.weights)
    name = cfg.workload.deployment_name("stable")
    for r in cfg.regions:
        k8s = KubernetesPlatform(r)
        try:
            k8s.scale(name, r.replicas)  # lowers the HPA minReplicas a failover's pre-scale raised
        finally:
            k8s.close()
    for r in cfg.regions:
        _wait(functools.partial(readiness.region_ready, r, cfg), timeout_s, f"{r.name} back at baseline")
    _wait(
        lambda: readiness.answers_completion(cfg.traffic.global_endpoint, cfg), timeout_s, "global endpoint"
    )


async def wait_probed_healthy(cfg: FleetConfig, timeout_s: float) -> None:
    """Until drctl's own probe calls every region HEALTHY (a lingering slow fault would not be)."""
    prober = InferenceProber(cfg)
    deadline = time.monotonic() + timeout_s
    while True:
        probes = await prober.probe_regions(cfg.region_names)
        bad = {p.region: p.reason for p in probes if p.status is not ProbeStatus.HEALTHY}
        if not bad:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"regions not HEALTHY after {timeout_s:g}s: {bad}")
        await asyncio.sleep(0.5)


async def wait_no_operations(client: Client, cfg: FleetConfig, timeout_s: float) -> None:
    """Until no mutating operation runs; one still running at the deadline is terminated, loudly."""
    deadline = time.monotonic() + timeout_s
    while ops := await running_operations(client, cfg):
        if time.monotonic() > deadline:
            for op in ops:
                print(f"bench: terminating leftover {op.workflow_id} (phase {op.phase})", flush=True)
                await client.get_workflow_handle(op.workflow_id, run_id=op.run_id).terminate("bench reset")
            return
        await asyncio.sleep(0.5)


def drain_s(cfg: FleetConfig, base_ttft_ms: float) -> float:
    """After a reset: until the requests the last fault slowed have had their first token, and their
    TTFT has left every passive window. Sooner, a fresh monitor sees the last trial's fault, and
    the probe that clears it holds passive suspicion off into the next trial."""
    passive = cfg.health.passive
    return SLOW_FACTOR * base_ttft_ms / 1000 + passive.window_s + passive.interval_s


def inject(cfg: FleetConfig, region: str, kind: Kind, base_ttft_ms: float) -> Any:
    """One fault in `region`: every stable replica killed (stays down), TTFT x20, or 50 % errors."""
    if kind == "down":
        return _admin(
            cfg, region, "/faults/replicas", {"action": "kill", "track": "stable", "stay_down": True}
        )
    if kind == "slow":
        return _admin(
            cfg,
            region,
            "/faults/inference",
            {"track": "stable", "added_latency_ms": (SLOW_FACTOR - 1) * base_ttft_ms},
        )
    return _admin(cfg, region, "/faults/inference", {"track": "stable", "error_rate": ERROR_RATE})


@contextlib.asynccontextmanager
async def running_worker(cfg: FleetConfig) -> AsyncIterator[Client]:
    """drctl's real worker in this process; its end (Ctrl-C, crash) aborts the body as WorkerStopped."""
    client = await connect(cfg)
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(cfg, client=client, stop=stop))
    body = asyncio.current_task()
    leaving = False

    def on_end(_: asyncio.Task[None]) -> None:
        if not leaving and body is not None:
            body.cancel()

    worker.add_done_callback(on_end)
    try:
        yield client
    except asyncio.CancelledError:
        if worker.done():
            exc = None if worker.cancelled() else worker.exception()
            raise WorkerStopped(f"worker stopped: {exc or 'interrupted'}") from exc
        raise
    finally:
        leaving = True
        stop.set()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(worker, 30)


def quiet_temporal() -> None:
    """Errors only from the Temporal SDK and its core, for a bench that runs a worker in its own process:
    its routine warnings (a cancelled monitor's last probe, late activity completions) are not figures."""
    logging.getLogger("temporalio").setLevel(logging.ERROR)
    Runtime.set_default(
        Runtime(
            telemetry=TelemetryConfig(
                logging=LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
            )
        ),
        error_if_already_set=False,
    )
