"""The worker's HTTP endpoint against the real Temporal dev server: /healthz, /readyz, /metrics."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from drctl.client.connection import connect
from drctl.config.schema import FleetConfig
from drctl.devstack import processes, stack
from drctl.worker.endpoint import WorkerHTTP
from drctl.worker.process import run_worker
from tests.support.ports import free_port
from tests.support.wait import assert_eventually

pytestmark = pytest.mark.devstack


def _private_queues(cfg: FleetConfig) -> FleetConfig:
    """The same fleet on fresh task queues, so this worker takes no other test's tasks."""
    tq = f"http-{uuid.uuid4().hex[:8]}"
    regions = [r.model_copy(update={"task_queue": f"{tq}-{r.name}"}) for r in cfg.regions]
    return cfg.model_copy(
        update={
            "temporal": cfg.temporal.model_copy(update={"task_queue": tq}),
            "regions": regions,
            "worker": cfg.worker.model_copy(update={"http_host": "127.0.0.1"}),
        }
    )


async def test_endpoint_serves_health_readiness_and_metrics_then_stops(
    fleet_config: FleetConfig, dev_stack: stack.StackInfo
) -> None:
    cfg = _private_queues(fleet_config)
    port = free_port()
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(cfg, stop=stop, http_port=port))
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(timeout=10) as http:

            async def ready() -> httpx.Response:
                try:
                    r = await http.get(f"{base}/readyz")
                except httpx.TransportError as exc:
                    raise AssertionError(f"not listening yet: {exc}") from None
                assert r.status_code == 200, r.text
                return r

            r = await assert_eventually(ready, timeout_s=30, interval_s=0.2, what="worker ready")
            assert cfg.temporal.task_queue in r.text and cfg.regions[0].queue in r.text
            assert (await http.get(f"{base}/healthz")).status_code == 200
            metrics = await http.get(f"{base}/metrics")
            assert metrics.headers["content-type"].startswith("text/plain")
            text = metrics.text
            # Fleet-wide figures read at scrape time, counters created at 0, and the SDK's own metrics.
            assert f'drctl_region_weight{{fleet="{cfg.name}",region="us-west-1"}} 60.0' in text
            assert f'drctl_failovers_total{{fleet="{cfg.name}",result="failed"}} 0.0' in text
            assert f'drctl_rto_target_seconds{{fleet="{cfg.name}"}} {cfg.objectives.rto_target_s}' in text
            assert "temporal_num_pollers{" in text and f'task_queue="{cfg.temporal.task_queue}"' in text
            assert (await http.get(f"{base}/nope")).status_code == 404
            assert (await http.post(f"{base}/metrics")).status_code == 405
        # Not HTTP at all: a 400, and the endpoint keeps serving.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"garbage\r\n\r\n")
        assert (await asyncio.wait_for(reader.read(), 10)).split(b" ", 2)[1] == b"400"
        writer.close()
        async with httpx.AsyncClient(timeout=10) as http:
            assert (await http.get(f"{base}/healthz")).status_code == 200
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
    assert not processes.port_open(port)


async def test_readyz_is_503_without_running_workers(
    fleet_config: FleetConfig, dev_stack: stack.StackInfo
) -> None:
    http = WorkerHTTP(fleet_config, await connect(fleet_config), lambda: [])
    r = await http.readyz()
    assert r.status == 503 and "not ready" in r.text


def test_taken_port_exits_2_naming_it(fleet_config_path: Path, dev_stack: stack.StackInfo) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "drctl",
                "worker",
                "-c",
                str(fleet_config_path),
                "--http-port",
                str(port),
                "--http-host",
                "127.0.0.1",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "Traceback" not in done.stderr
