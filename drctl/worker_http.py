"""The worker's small HTTP endpoint: /metrics for Prometheus, /healthz and /readyz for Kubernetes.

- /healthz (liveness): answered by the worker's own event loop, so an answer proves the process and
  its loop are alive; a wedged loop times the probe out and Kubernetes restarts the pod.
- /readyz (readiness): Temporal answers a health check and every task-queue worker is running.
- /metrics: drctl's metrics (drctl/metrics.py) refreshed by the scrape-time reader, followed by
  the Temporal SDK's own metrics, which the SDK runtime serves on a private loopback port; merged
  here so one scrape target per worker carries both.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

from aiohttp import ClientSession, ClientTimeout, web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Worker

from drctl.config import FleetConfig
from drctl.fleet_metrics import FleetReader

log = logging.getLogger("drctl.worker")


def sdk_metrics_runtime() -> tuple[Runtime, str]:
    """A Temporal runtime exporting SDK metrics on a free loopback port, and that port's URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    prom = PrometheusConfig(bind_address=f"127.0.0.1:{port}", counters_total_suffix=True, unit_suffix=True,
                            durations_as_seconds=True)
    return Runtime(telemetry=TelemetryConfig(metrics=prom)), f"http://127.0.0.1:{port}/metrics"


class EndpointError(RuntimeError):
    """The HTTP endpoint cannot listen (port taken, address not local)."""


class WorkerHTTP:
    def __init__(self, cfg: FleetConfig, client: Client, workers: Callable[[], Sequence[Worker]],
                 sdk_metrics_url: str | None = None) -> None:
        self.client = client
        self.workers = workers
        self.sdk_metrics_url = sdk_metrics_url
        self.reader = FleetReader(cfg, client)
        self._session: ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.metrics)
        return app

    async def healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(self, _: web.Request) -> web.Response:
        workers = self.workers()
        stopped = [w.task_queue for w in workers if not w.is_running]
        if not workers or stopped:
            return web.Response(status=503, text=f"not ready: workers not running on {stopped or 'any queue'}\n")
        try:
            ok = await asyncio.wait_for(self.client.service_client.check_health(), 3.0)
        except Exception as exc:  # noqa: BLE001 - any failure means "not ready", with the reason
            return web.Response(status=503, text=f"not ready: Temporal health check failed: {exc or type(exc).__name__}\n")
        if not ok:
            return web.Response(status=503, text="not ready: Temporal reports not serving\n")
        return web.Response(text=f"ready: {', '.join(w.task_queue for w in workers)}\n")

    async def metrics(self, _: web.Request) -> web.Response:
        await self.reader.refresh()
        body = generate_latest(REGISTRY)
        if self.sdk_metrics_url:
            body += await self._sdk_metrics()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _sdk_metrics(self) -> bytes:
        if self._session is None:
            self._session = ClientSession(timeout=ClientTimeout(total=2.0))
        try:
            async with self._session.get(self.sdk_metrics_url or "") as resp:
                return await resp.read() if resp.status == 200 else b""
        except Exception as exc:  # noqa: BLE001 - drctl's own metrics are still worth serving
            log.warning("Temporal SDK metrics unavailable: %s", exc or type(exc).__name__)
            return b""

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


@asynccontextmanager
async def serve(cfg: FleetConfig, client: Client, workers: Callable[[], Sequence[Worker]], port: int,
                sdk_metrics_url: str | None = None) -> AsyncIterator[WorkerHTTP | None]:
    """Serve the endpoint on cfg.worker.http_host:port for the duration; port 0 serves nothing."""
    if not port:
        yield None
        return
    http = WorkerHTTP(cfg, client, workers, sdk_metrics_url)
    runner = web.AppRunner(http.app(), access_log=None)
    await runner.setup()
    try:
        try:
            await web.TCPSite(runner, cfg.worker.http_host, port).start()
        except OSError as exc:
            raise EndpointError(
                f"the worker's HTTP endpoint cannot listen on {cfg.worker.http_host}:{port}: {exc.strerror or exc}; "
                "choose another worker.http_port (or --http-port; 0 disables the endpoint)") from None
        log.info("worker HTTP endpoint on %s:%d (/metrics, /healthz, /readyz)", cfg.worker.http_host, port)
        yield http
    finally:
        await http.close()
        await runner.cleanup()
