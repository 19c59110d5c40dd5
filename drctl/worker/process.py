"""The drctl worker: workflows and region-neutral activities on the main queue, plus one worker per
served region on that region's queue.

Every worker registers the same activities; which worker runs a call is decided by the task queue
the workflow names (region-bound calls go to the region's queue). Running `drctl worker --region R`
in region R therefore keeps failovers to R working when every other region is gone.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from drctl.client.connection import connect, target
from drctl.client.identity import worker_identity
from drctl.config.schema import FleetConfig, GatewayApiRegional
from drctl.worker import registry
from drctl.worker.endpoint import sdk_metrics_runtime, serve
from drctl.worker.fleets import check_fleets, queues_of
from drctl.worker.link import TemporalLink, connect_with_backoff

log = logging.getLogger("drctl.worker")


def build_workers(
    client: Client,
    cfg: FleetConfig,
    regions: list[str] | None,
    executor: ThreadPoolExecutor,
    *,
    main: bool = True,
) -> list[Worker]:
    """Workers for the main queue (when `main`) and each served region (default: all of them)."""
    served = regions if regions is not None else cfg.region_names
    for r in served:
        cfg.region(r)  # raises UnknownRegionError listing the known regions
    activities = registry.activities(cfg)
    # After shutdown() stops polling, running activities get this long to finish before they are
    # cancelled; the pod's terminationGracePeriodSeconds must be longer (deploy/kubernetes checks it).
    grace = timedelta(seconds=cfg.worker.graceful_shutdown_s)
    workers: list[Worker] = []
    if main:
        workers.append(
            Worker(
                client,
                task_queue=cfg.temporal.task_queue,
                workflows=registry.workflows(),
                activities=activities,
                activity_executor=executor,
                graceful_shutdown_timeout=grace,
            )
        )
    for r in served:
        workers.append(
            Worker(
                client,
                task_queue=cfg.region(r).queue,
                activities=activities,
                activity_executor=executor,
                graceful_shutdown_timeout=grace,
            )
        )
    return workers


async def run_worker(
    cfg: FleetConfig | Sequence[FleetConfig],
    regions: list[str] | None = None,
    *,
    main: bool = True,
    client: Client | None = None,
    stop: asyncio.Event | None = None,
    http_port: int | None = None,
) -> None:
    """Run until SIGTERM/SIGINT (or `stop` is set), then shut down gracefully.

    `cfg`: one fleet, or several sharing this process (one Temporal client, one activity thread pool,
    one HTTP endpoint; each fleet its own queues, checked by worker_fleets.check_fleets). The first
    fleet's `worker` and `temporal` settings are the process's. `regions` applies to every fleet.
    `http_port` overrides cfg.worker.http_port (0: no HTTP endpoint).
    Without `client`, Temporal is awaited with backoff (drctl/worker/link.py), not given up on: only
    a configuration error (TemporalConfigError, EndpointError) ends the worker before `stop`.
    """
    cfgs = [cfg] if isinstance(cfg, FleetConfig) else list(cfg)
    check_fleets(cfgs, regions, main=main)
    first = cfgs[0]
    port = first.worker.http_port if http_port is None else http_port
    # SDK metrics need the runtime at connect time, so only a client made here exports them.
    runtime, sdk_url = (
        sdk_metrics_runtime() if client is None and port and first.worker.sdk_metrics else (None, None)
    )
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # not the main thread (tests run it in a task)
            pass
    link = TemporalLink(target(first).address)  # a bad temporal section raises here: exit 2
    workers: list[Worker] = []
    # The HTTP endpoint binds first (a taken port fails before anything else) and stays up while
    # Temporal is awaited and through shutdown, so /readyz reports both and metrics can be scraped.
    async with serve(cfgs, client, lambda: workers, port, sdk_url, link) as http:
        if client is None:
            identity = worker_identity()
            client = await connect_with_backoff(
                lambda: connect(first, runtime, identity=identity), link, stop
            )
            if client is None:
                log.info("stopped before Temporal at %s could be reached", link.address)
                return
            if http is not None:
                http.attach(client)
        link.up()
        await _serve_queues(client, cfgs, regions, main, stop, workers)


async def _serve_queues(
    client: Client,
    cfgs: list[FleetConfig],
    regions: list[str] | None,
    main: bool,
    stop: asyncio.Event,
    workers: list[Worker],
) -> None:
    """Poll every fleet's queues until `stop`, then drain; `workers` is filled for /readyz."""
    first = cfgs[0]
    for c in cfgs:
        await _prepare(client, c, regions, main=main)
    # Every fleet's sync activities share this pool; the watcher and the probes are async, so a
    # long-lived watcher per fleet holds no thread of it and the pool need not grow with the fleets.
    with ThreadPoolExecutor(max_workers=16, thread_name_prefix="drctl-activity") as executor:
        workers[:] = [w for c in cfgs for w in build_workers(client, c, regions, executor, main=main)]
        for c in cfgs:
            log.info(
                "drctl worker for fleet %r serving task queues %s on %s",
                c.name,
                queues_of(c, regions, main=main),
                target(c).address,
            )
        runs = [asyncio.create_task(w.run()) for w in workers]
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait([*runs, stopper], return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            log.info("stopping: running activities have %gs to finish", first.worker.graceful_shutdown_s)
        # Shutdown lets running activities finish (up to graceful timeout) so no work is lost twice.
        await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)
        log.info("drctl worker stopped")
        stopper.cancel()
        for t in runs:
            if t.done() and t.exception() is not None and not stop.is_set():
                raise t.exception()  # type: ignore[misc]


async def _prepare(client: Client, cfg: FleetConfig, regions: list[str] | None, *, main: bool) -> None:
    if main:
        from activities.drill_faults import sweep_orphan_faults

        # A worker killed mid-drill may have left a fault whose drill is gone: clear it first.
        await sweep_orphan_faults(client, cfg)
    if isinstance(cfg.traffic.regional_tier, GatewayApiRegional):
        await asyncio.to_thread(_label_routes, cfg, regions if regions is not None else cfg.region_names)


def _label_routes(cfg: FleetConfig, regions: list[str]) -> None:
    """Each region's worker makes its HTTPRoute name the region in `traffic.region_header`.

    Best effort: a cluster that is down now must not keep the worker from serving; weight
    changes write the same filter, and until it exists verification reports `unverified`.
    """
    from drctl.providers.gateway_api import GatewayApiRegionalTraffic

    tier = GatewayApiRegionalTraffic.from_config(cfg)
    for r in regions:
        try:
            if tier.ensure_region_header(r):
                log.info("HTTPRoute of %s now sets %s: %s", r, cfg.traffic.region_header, r)
        except Exception as exc:  # noqa: BLE001 - logged and retried by the next weight change
            log.warning("could not label the HTTPRoute of %s with %s: %s", r, cfg.traffic.region_header, exc)
