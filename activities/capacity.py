"""Capacity signals: a region's ready replicas and their vLLM gauges and counters, read on the
region's own task queue (its worker is where the pod IPs are routable)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.defined import activity_methods
from activities.health import known_regions
from drctl.config.schema import FleetConfig
from drctl.models.capacity_sample import CapacityReadInput, CapacityReadResult
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
        if self._reader is None:
            self._reader = CapacitySignalReader(self.cfg, KubernetesReplicaSource(self.cfg))
        return await self._reader.read(inp.region, inp.previous, inp.max_window_s)


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(CapacityActivities(cfg))
