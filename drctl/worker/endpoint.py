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

Served by a minimal HTTP/1.1 responder on asyncio streams (GET only, one request per connection):
three fixed paths do not justify a web framework in the worker image.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Worker

from drctl.client.namespace import register_hint, search_attribute_problems
from drctl.config.schema import FleetConfig
from drctl.telemetry import metrics
from drctl.worker.fleet_metrics import FleetReader

log = logging.getLogger("drctl.worker")

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}
_MAX_HEAD = 16 * 1024  # request line and headers; a probe or scrape sends a few hundred bytes
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
        client: Client,
        workers: Callable[[], Sequence[Worker]],
        sdk_metrics_url: str | None = None,
    ) -> None:
        self.client = client
        self.workers = workers
        self.sdk_metrics_url = sdk_metrics_url
        # One reader per fleet this worker serves: every fleet's figures come from the one scrape.
        self.readers = [FleetReader(c, client) for c in _fleets(cfg)]
        self._http: httpx.AsyncClient | None = None
        self._reading: asyncio.Future[list[None]] | None = None
        self._attributes_ok = False

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
        workers = self.workers()
        stopped = [w.task_queue for w in workers if not w.is_running]
        if not workers or stopped:
            return Response(503, f"not ready: workers not running on {stopped or 'any queue'}\n".encode())
        try:
            ok = await asyncio.wait_for(self.client.service_client.check_health(), 3.0)
        except Exception as exc:  # noqa: BLE001 - any failure means "not ready", with the reason
            why = f"not ready: Temporal health check failed: {exc or type(exc).__name__}\n"
            return Response(503, why.encode())
        if not ok:
            return Response(503, b"not ready: Temporal reports not serving\n")
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
        ns = self.client.namespace
        try:
            # wait_for as well: the RPC's own timeout does not cover connecting to a hung frontend.
            problems = await asyncio.wait_for(search_attribute_problems(self.client), 3.0)
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

    async def metrics(self) -> Response:
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

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One request per connection (`Connection: close`), bounded in size and time."""
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            resp = await self.route(method, target)
            payload = b"" if method == "HEAD" else resp.body
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            resp, payload = Response(400, b"bad request\n"), b"bad request\n"
        except ConnectionError:
            return
        try:
            writer.write(
                f"HTTP/1.1 {resp.status} {_REASONS.get(resp.status, '')}\r\n"
                f"Content-Type: {resp.content_type}\r\nContent-Length: {len(resp.body)}\r\n"
                "Connection: close\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        if self._reading is not None and not self._reading.done():
            self._reading.cancel()
        if self._http is not None:
            await self._http.aclose()


@asynccontextmanager
async def serve(
    cfg: FleetConfig | Sequence[FleetConfig],
    client: Client,
    workers: Callable[[], Sequence[Worker]],
    port: int,
    sdk_metrics_url: str | None = None,
) -> AsyncIterator[WorkerHTTP | None]:
    """Serve the endpoint on (the first fleet's) worker.http_host:port for the duration; port 0 serves nothing."""
    if not port:
        yield None
        return
    fleets = _fleets(cfg)
    cfg = fleets[0]
    http = WorkerHTTP(fleets, client, workers, sdk_metrics_url)
    try:
        server = await asyncio.start_server(http.handle, cfg.worker.http_host, port, limit=_MAX_HEAD)
    except OSError as exc:
        raise EndpointError(
            f"the worker's HTTP endpoint cannot listen on {cfg.worker.http_host}:{port}: {exc.strerror or exc}; "
            "choose another worker.http_port (or --http-port; 0 disables the endpoint)"
        ) from None
    log.info("worker HTTP endpoint on %s:%d (/metrics, /healthz, /readyz)", cfg.worker.http_host, port)
    try:
        yield http
    finally:
        server.close()
        await server.wait_closed()
        await http.close()


def _fleets(cfg: FleetConfig | Sequence[FleetConfig]) -> list[FleetConfig]:
    return [cfg] if isinstance(cfg, FleetConfig) else list(cfg)
