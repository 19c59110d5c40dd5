"""Capacity signals: a region's ready replicas and their vLLM gauges and counters, read on the
region's own task queue (its worker is where the pod IPs are routable)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.defined import activity_methods
from activities.health import known_regions
from drctl.config.schema import FleetConfig
from drctl.models.capacity_sample import CapacityReadInput, CapacityReadResult
from drctl.models.capacity_watch import CapacityWatchInput, CapacityWatchResult, transition
from drctl.providers.capacity_signals import CapacitySignalReader
from drctl.providers.replicas import KubernetesReplicaSource


class CapacityActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        # Built on first use: the HTTP client belongs to the worker's event loop, not the importer's.
        self._reader: CapacitySignalReader | None = None

    @activity.defn(name="read_capacity_signals")
    async def read_capacity_signals(self, inp: CapacityReadInput) -> CapacityReadResult:
        """One reading; what could not be read is in `signals.problems`, never an error (the rule
        treats an unread capacity as unknown). Only a region this worker does not know fails."""
        _, unresolved = known_regions(self.cfg, [inp.region])
        if unresolved:
            raise ApplicationError(unresolved[inp.region], type="UnknownRegion", non_retryable=True)
        return await self._read().read(inp.region, inp.previous, inp.max_window_s)

    def _read(self) -> CapacitySignalReader:
        if self._reader is None:
            self._reader = CapacitySignalReader(self.cfg, KubernetesReplicaSource(self.cfg))
        return self._reader

    @activity.defn(name="watch_capacity")
    async def watch_capacity(self, inp: CapacityWatchInput) -> CapacityWatchResult:
        """The rebalance's quiet wait (drctl/models/capacity_watch.py): the region's signals every
        `interval_s`, returned on a transition or at the checkpoint. Heartbeats every second; a
        worker shutting down fails it at once (the rebalance then ticks as usual)."""
        _, unresolved = known_regions(self.cfg, [inp.region])
        if unresolved:
            raise ApplicationError(unresolved[inp.region], type="UnknownRegion", non_retryable=True)
        watch = asyncio.create_task(self._watch(inp))
        shutdown = asyncio.create_task(activity.wait_for_worker_shutdown())
        try:
            done, _ = await asyncio.wait([watch, shutdown], return_when=asyncio.FIRST_COMPLETED)
            if watch in done:
                return watch.result()
            raise ApplicationError("worker shutting down", type="WorkerShutdown")
        finally:
            for task in (watch, shutdown):
                task.cancel()
            await asyncio.gather(watch, shutdown, return_exceptions=True)

    async def _watch(self, inp: CapacityWatchInput) -> CapacityWatchResult:
        reader = self._read()
        deadline = time.monotonic() + inp.return_after_s
        previous, reads = inp.previous, 0
        while True:
            activity.heartbeat(reads)
            out = await reader.read(inp.region, previous, inp.max_window_s)
            reads += 1
            why = transition(inp, out.signals)
            if why or time.monotonic() >= deadline:
                return CapacityWatchResult(
                    reason="transition" if why else "checkpoint",
                    why=why,
                    reads=reads,
                    baseline=previous,
                )
            previous = out.sample
            # Sleep in heartbeat-sized steps: a cancel or a lost worker is seen within a second.
            wake = min(deadline, time.monotonic() + inp.interval_s)
            while (left := wake - time.monotonic()) > 0:
                activity.heartbeat(reads)
                await asyncio.sleep(min(1.0, left))


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(CapacityActivities(cfg))
