"""The worker's small HTTP endpoint: /metrics for Prometheus, /healthz and /readyz for Kubernetes.

- /healthz (liveness): answered by the worker's own event loop, so an answer proves the process and
  its loop are alive; a wedged loop times the probe out and Kubernetes restarts the pod.
- /readyz (readiness): Temporal answers a health check, every task-queue worker is running, and the
  namespace has every search attribute drctl upserts (checked until it has them once; a worker on a
  namespace without them would take every workflow task and fail it, so it must not take traffic).
- /metrics: drctl's metrics (drctl/telemetry/metrics.py) refreshed by the scrape-time reader, followed by
  the Temporal SDK's own metrics, which the SDK runtime serves on a private loopback port; merged
  here so one scrape target per worker carries both. A scrape waits at most `READ_BUDGET_S` for
  the reader: a slow Temporal must not make the scrape time out, because Prometheus then marks
  every series of the target stale (the probes' and failovers' figures too, not only the reader's).
  The read goes on in the background and the next scrape serves it.

While the worker waits for Temporal (drctl/worker/link.py), /readyz says so with 503 and /metrics
serves what needs no read, with drctl_worker_temporal_disconnected_seconds growing.

Served by aiohttp's low-level server (already the prober's client library): it parses HTTP
strictly, answers a malformed request 400, bounds the request line and headers, and listens with a
deep accept queue so a burst of scrapes and probes is queued, not dropped.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Worker

from drctl.client.codec_http import one_line_log
from drctl.client.namespace import register_hint, search_attribute_problems
from drctl.config.schema import FleetConfig
from drctl.telemetry import metrics
from drctl.worker.fleet_metrics import FleetReader
from drctl.worker.link import TemporalLink

log = logging.getLogger("drctl.worker")

_MAX_LINE = 8 * 1024  # request line and each header; a probe or scrape sends a few hundred bytes
_BACKLOG = 2048
_IDLE_TIMEOUT_S = 15.0  # Prometheus keeps its connection between scrapes; a longer idle one is closed
# Well inside the shortest scrape timeout we expect (the dev stack's 2 s; Prometheus's default is 10 s).
READ_BUDGET_S = 1.0
SDK_METRICS_TIMEOUT_S = 0.5


def sdk_metrics_runtime() -> tuple[Runtime, str]:
    """A Temporal runtime exporting SDK metrics on a free loopback port, and that port's URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    prom = PrometheusConfig(
        bind_address=f"127.0.0.1:{port}",
        counters_total_suffix=True,
        unit_suffix=True,
        durations_as_seconds=True,
    )
    return Runtime(telemetry=TelemetryConfig(metrics=prom)), f"http://127.0.0.1:{port}/metrics"


def _log_failed_read(done: asyncio.Future[list[None]]) -> None:
    # Retrieved here too: a read that outlived its scrape has nobody else to report its failure.
    if not done.cancelled() and done.exception() is not None:
        log.warning("fleet metrics read failed: %s", done.exception())


@dataclass
class Response:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"

    @property
    def text(self) -> str:
        return self.body.decode()


class EndpointError(RuntimeError):
    """The HTTP endpoint cannot listen (port taken, address not local)."""


class WorkerHTTP:
    def __init__(
        self,
        cfg: FleetConfig | Sequence[FleetConfig],
        client: Client | None,
        workers: Callable[[], Sequence[Worker]],
        sdk_metrics_url: str | None = None,
        link: TemporalLink | None = None,
    ) -> None:
        """`client` None: not connected yet (`link` says since when); `attach` it once connected."""
        self.fleets = _fleets(cfg)
        self.workers = workers
        self.sdk_metrics_url = sdk_metrics_url
        self.link = link
        self.client: Client | None = None
        self.readers: list[FleetReader] = []
        if client is not None:
            self.attach(client)
        self._http: httpx.AsyncClient | None = None
        self._reading: asyncio.Future[list[None]] | None = None
        self._attributes_ok = False

    def attach(self, client: Client) -> None:
        """Connected: readiness and the scrape-time reads use `client` from now on."""
        self.client = client
        # One reader per fleet this worker serves: every fleet's figures come from the one scrape.
        self.readers = [FleetReader(c, client) for c in self.fleets]

    async def route(self, method: str, path: str) -> Response:
        path = path.split("?", 1)[0]
        handler = {"/healthz": self.healthz, "/readyz": self.readyz, "/metrics": self.metrics}.get(path)
        if handler is None:
            return Response(404, b"not found: /metrics, /healthz, /readyz\n")
        if method not in ("GET", "HEAD"):
            return Response(405, b"GET only\n")
        return await handler()

    async def healthz(self) -> Response:
        return Response(200, b"ok\n")

    async def readyz(self) -> Response:
        client = self.client
        if client is None:
            link = self.link
            why = (
                f"Temporal at {link.address} unreachable for {link.disconnected_s():.0f}s: {link.error}"
                if link
                else "not connected to Temporal"
            )
            return Response(503, f"not ready: {why}\n".encode())
        workers = self.workers()
        stopped = [w.task_queue for w in workers if not w.is_running]
        if not workers or stopped:
            return Response(503, f"not ready: workers not running on {stopped or 'any queue'}\n".encode())
        try:
            ok = await asyncio.wait_for(client.service_client.check_health(), 3.0)
        except Exception as exc:  # noqa: BLE001 - any failure means "not ready", with the reason
            self._link_down(f"health check failed: {exc or type(exc).__name__}")
            why = f"not ready: Temporal health check failed: {exc or type(exc).__name__}\n"
            return Response(503, why.encode())
        if not ok:
            self._link_down("health check: not serving")
            return Response(503, b"not ready: Temporal reports not serving\n")
        if self.link is not None:
            self.link.up()
        lacking = await self.search_attributes()
        if lacking:
            return Response(503, f"not ready: {lacking}\n".encode())
        return Response(200, f"ready: {', '.join(w.task_queue for w in workers)}\n".encode())

    async def search_attributes(self) -> str | None:
        """None once the namespace has every attribute drctl upserts, else why not (and the metric).

        Checked until it passes once: attributes are not removed under a running fleet, and a
        readiness probe every few seconds should not cost an operator-service call each time.
        """
        if self._attributes_ok:
            return None
        client = self.client
        if client is None:
            return "not connected to Temporal"
        ns = client.namespace
        try:
            # wait_for as well: the RPC's own timeout does not cover connecting to a hung frontend.
            problems = await asyncio.wait_for(search_attribute_problems(client), 3.0)
        except Exception as exc:  # noqa: BLE001 - unknown is "not ready", with the reason
            return f"cannot list the search attributes of namespace {ns}: {exc or type(exc).__name__}"
        metrics.SEARCH_ATTRIBUTES_MISSING.labels(namespace=ns).set(len(problems))
        if problems:
            return (
                f"namespace {ns} lacks drctl's search attributes ({'; '.join(problems)}), so every "
                f"workflow task would fail; {register_hint(problems)}"
            )
        self._attributes_ok = True
        return None

    def _link_down(self, why: str) -> None:
        # Readiness probes every few seconds notice a Temporal lost after start, for the gauge.
        if self.link is not None:
            self.link.down(why)

    async def metrics(self) -> Response:
        if self.link is not None:
            metrics.WORKER_TEMPORAL_DISCONNECTED.set(self.link.disconnected_s())
        if self.client is not None:
            await self._refresh_within(READ_BUDGET_S)
        body = generate_latest(REGISTRY)
        if self.sdk_metrics_url:
            body += await self._sdk_metrics()
        return Response(200, body, CONTENT_TYPE_LATEST)

    async def _refresh_within(self, budget_s: float) -> None:
        """Start a read (unless one runs) and wait for it at most `budget_s`; past that, the scrape
        serves the figures of the previous read and this one finishes in the background."""
        reading = self._reading
        if reading is None or reading.done():
            # The search-attribute check rides along (its RPC bounded by its own timeout), so the
            # scrape waits once, for all of them, at most `budget_s`.
            reading = self._reading = asyncio.ensure_future(
                asyncio.gather(*(r.refresh() for r in self.readers), self._attributes_metric())
            )
            reading.add_done_callback(_log_failed_read)
        try:
            await asyncio.wait_for(asyncio.shield(reading), budget_s)
        except TimeoutError:
            log.warning("fleet metrics read still running after %gs: serving the previous figures", budget_s)

    async def _attributes_metric(self) -> None:
        await self.search_attributes()  # sets drctl_search_attributes_missing; the reason is for /readyz

    async def _sdk_metrics(self) -> bytes:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=SDK_METRICS_TIMEOUT_S)
        try:
            resp = await self._http.get(self.sdk_metrics_url or "")
            return resp.content if resp.status_code == 200 else b""
        except httpx.HTTPError as exc:  # drctl's own metrics are still worth serving
            log.warning("Temporal SDK metrics unavailable: %s", exc or type(exc).__name__)
            return b""

    async def handle(self, request: web.BaseRequest) -> web.Response:
        """aiohttp's handler: the route's answer; a HEAD gets its headers without the body."""
        resp = await self.route(request.method, request.path)
        return web.Response(status=resp.status, body=resp.body, headers={"Content-Type": resp.content_type})

    async def close(self) -> None:
        if self._reading is not None and not self._reading.done():
            self._reading.cancel()
        if self._http is not None:
            await self._http.aclose()


@asynccontextmanager
async def serve(
    cfg: FleetConfig | Sequence[FleetConfig],
    client: Client | None,
    workers: Callable[[], Sequence[Worker]],
    port: int,
    sdk_metrics_url: str | None = None,
    link: TemporalLink | None = None,
) -> AsyncIterator[WorkerHTTP | None]:
    """Serve the endpoint on (the first fleet's) worker.http_host:port for the duration; port 0 serves nothing."""
    if not port:
        yield None
        return
    fleets = _fleets(cfg)
    cfg = fleets[0]
    http = WorkerHTTP(fleets, client, workers, sdk_metrics_url, link)
    server = web.Server(
        http.handle,
        keepalive_timeout=_IDLE_TIMEOUT_S,
        max_line_size=_MAX_LINE,
        max_field_size=_MAX_LINE,
        max_headers=64,
        access_log=None,
        logger=one_line_log("drctl.worker.http"),
    )
    runner = web.ServerRunner(server, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, cfg.worker.http_host, port, backlog=_BACKLOG, shutdown_timeout=5.0)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise EndpointError(
            f"the worker's HTTP endpoint cannot listen on {cfg.worker.http_host}:{port}: {exc.strerror or exc}; "
            "choose another worker.http_port (or --http-port; 0 disables the endpoint)"
        ) from None
    log.info("worker HTTP endpoint on %s:%d (/metrics, /healthz, /readyz)", cfg.worker.http_host, port)
    try:
        yield http
    finally:
        await runner.cleanup()
        await http.close()


def _fleets(cfg: FleetConfig | Sequence[FleetConfig]) -> list[FleetConfig]:
    return [cfg] if isinstance(cfg, FleetConfig) else list(cfg)
