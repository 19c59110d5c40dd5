"""Probe activities: the inference-aware health check of regions, run on the main task queue."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.defined import activity_methods
from drctl.config.schema import FleetConfig
from drctl.models.activity_io import ProbeBatch, ProbeRequest, RegionRequest
from drctl.models.health import RegionProbe
from drctl.providers.probe import InferenceProber
from drctl.telemetry import metrics


def known_regions(cfg: FleetConfig, regions: list[str]) -> tuple[list[str], dict[str, str]]:
    """The regions this worker's config knows, and why each other one cannot be probed here."""
    known = [r for r in regions if r in cfg.region_names]
    unresolved = {
        r: f"worker {activity.info().task_queue} has no region {r!r} in its config "
        f"({cfg.source_path or 'built in code'}); known: {', '.join(cfg.region_names)}"
        for r in regions
        if r not in known
    }
    return known, unresolved


class HealthActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self.fleet = cfg.name
        self.prober = InferenceProber(cfg)

    @activity.defn(name="probe_regions")
    async def probe_regions(self, inp: ProbeRequest) -> ProbeBatch:
        # A region the caller knows but this worker's config does not (the two configs drifted apart)
        # is reported, not raised: raising would blind the whole round, every round, for every region.
        known, unresolved = known_regions(self.cfg, inp.regions)
        probes = await self.prober.probe_regions(known)
        for p in probes:
            metrics.record_probe(self.fleet, p, time.time())
        return ProbeBatch(probes=probes, unresolved=unresolved)

    @activity.defn(name="probe_region")
    async def probe_region(self, inp: RegionRequest) -> RegionProbe:
        probe = await self.prober.probe_region(inp.region)
        metrics.record_probe(self.fleet, probe, time.time())
        return probe


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(HealthActivities(cfg))
