"""Watch a region that just took traffic until it meets `objectives.slo` again, held for the window.

Reads every replica's vLLM `/metrics` (server-side TTFT histograms, request and 5xx counters) about
once a second, as the passive watcher does, and judges with drctl.models.slo. Bounded: it returns
once the objective has held for `window_s`, or when a run could no longer start within the RTO
target and still hold (models.slo.observe_until_s). It runs on the target region's queue, where
the replicas are reachable, so the failed region's worker is never needed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
from temporalio import activity

from activities.defined import activity_methods
from drctl.config.schema import FleetConfig, RegionConfig
from drctl.models.passive import SignalSnapshot
from drctl.models.slo import (
    SloInterval,
    SloWatchInput,
    SloWatchResult,
    judge_slo,
    observe_until_s,
    slo_interval,
)
from drctl.providers.replicas import KubernetesReplicaSource, ReplicaEndpoint, ReplicaSource
from drctl.providers.vllm_metrics import ReplicaTarget, read_replicas

KEPT_INTERVALS = 60  # the result carries the last minute of figures, not the whole watch
LIST_EVERY_S = 5.0  # the platform owns the replica set: re-listed now and then (a scale-up adds some)


class SloActivities:
    def __init__(self, cfg: FleetConfig, replicas: ReplicaSource | None = None) -> None:
        self.cfg = cfg
        self.replicas = replicas or KubernetesReplicaSource(cfg)

    @activity.defn(name="watch_slo")
    async def watch_slo(self, inp: SloWatchInput) -> SloWatchResult:
        """Read the target's replicas every interval_s until the objective held, or it is too late."""
        region = self.cfg.region(inp.region)
        # Offsets are seconds after the fault, like the RTO: the wall clock once, then monotonic.
        base = (datetime.now(UTC) - inp.fault_at).total_seconds() - time.monotonic()

        def since_fault() -> float:
            return base + time.monotonic()

        window = inp.objective.window_s
        # Even a watch that starts late (a slow failover) reads one full window, to say how it stands.
        stop_at = max(observe_until_s(inp), since_fault() + window + inp.interval_s)
        timeout_s = self.cfg.health.probe_timeout_s
        intervals: list[SloInterval] = []
        errors: dict[str, str] = {}
        listing: dict[str, str] = {}
        endpoints: list[ReplicaEndpoint] = []
        listed_at = float("-inf")
        before: dict[str, SignalSnapshot] = {}
        before_t = started = since_fault()
        async with httpx.AsyncClient(trust_env=False) as client:
            while True:
                activity.heartbeat(len(intervals))
                if since_fault() - listed_at >= LIST_EVERY_S:
                    endpoints, listed_at = (
                        await self._list(region, listing, endpoints, timeout_s),
                        since_fault(),
                    )
                targets = [ReplicaTarget(region.name, e.name, e.url) for e in endpoints]
                snaps, failed = await read_replicas(
                    client, targets, timeout_s=timeout_s, concurrency=self.cfg.health.probe_concurrency
                )
                now = since_fault()
                errors = listing | failed
                after = {s.source: s for s in snaps}
                if before:
                    intervals.append(slo_interval(before, after, before_t, now))
                before, before_t = after, now
                verdict = judge_slo(intervals, inp.objective)
                # A target with no load to judge by (none moved, or only drctl's own probes) is
                # reported after one window, not waited out to the RTO target.
                if verdict.restored_s is not None or now >= stop_at or not verdict.judged:
                    break
                await asyncio.sleep(max(0.0, min(inp.interval_s, stop_at - now)))
        met = (
            None
            if not verdict.judged
            else verdict.restored_s is not None and verdict.restored_s <= inp.within_s
        )
        return SloWatchResult(
            region=inp.region,
            restored_s=verdict.restored_s,
            met=met,
            evidence=verdict.evidence,
            started_s=round(started, 3),
            observed_s=round(before_t, 3),
            intervals=intervals[-KEPT_INTERVALS:],
            read_errors=errors,
        )

    async def _list(
        self, region: RegionConfig, errors: dict[str, str], last: list[ReplicaEndpoint], timeout_s: float
    ) -> list[ReplicaEndpoint]:
        """The region's replicas; a failed listing keeps the last list and is reported."""
        try:
            # Within the heartbeat timeout (10 s) together with the reads that follow it.
            found = await asyncio.wait_for(self.replicas.replicas(region), timeout_s * 2)
        except Exception as exc:  # noqa: BLE001 - any listing failure is evidence, reported in the result
            errors["listing"] = f"listing replicas failed: {type(exc).__name__}: {exc}"
            return last
        errors.pop("listing", None)
        return found


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(SloActivities(cfg))
