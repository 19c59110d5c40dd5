"""Probe activities: the inference-aware health check of regions, run on the main task queue."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from drctl.config import FleetConfig
from drctl.models.health import RegionProbe
from drctl.models.ops import ProbeBatch, ProbeRequest, RegionRequest
from drctl.providers.probe import InferenceProber


class HealthActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self.prober = InferenceProber(cfg)

    @activity.defn(name="probe_regions")
    async def probe_regions(self, inp: ProbeRequest) -> ProbeBatch:
        # A region the caller knows but this worker's config does not (the two configs drifted apart)
        # is reported, not raised: raising would blind the whole round, every round, for every region.
        known = [r for r in inp.regions if r in self.cfg.region_names]
        unresolved = {
            r: f"worker {activity.info().task_queue} has no region {r!r} in its config "
               f"({self.cfg.source_path or 'built in code'}); known: {', '.join(self.cfg.region_names)}"
            for r in inp.regions if r not in known
        }
        return ProbeBatch(probes=await self.prober.probe_regions(known), unresolved=unresolved)

    @activity.defn(name="probe_region")
    async def probe_region(self, inp: RegionRequest) -> RegionProbe:
        return await self.prober.probe_region(inp.region)


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    acts = HealthActivities(cfg)
    return [acts.probe_regions, acts.probe_region]
