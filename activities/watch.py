"""The watcher: the monitor's probe and passive-signal loop as one long-lived, heartbeating activity.

Temporal's guidance for polling faster than about a minute: poll inside an activity, and record
only what matters. The watcher probes every `interval_s` (fast confirm while a region is SUSPECT),
reads passive signals every `health.passive.interval_s` when enabled, and feeds both to the same
state machine the monitor's rounds use (drctl.models.watch). It returns only when a region's state
changes, the unresolved regions or credential refusals change, or `return_after_s` is up (the
monitor's checkpoint: continue-as-new, spec updates, a due failback).

Every heartbeat (about 1 s apart; Temporal forwards them throttled, at most every 0.8 x the
heartbeat timeout) carries the trackers, so an attempt retried after its worker died or restarted
resumes from the last heartbeat instead of from the state the monitor last saw.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.defined import activity_methods
from activities.health import known_regions
from drctl.config.schema import FleetConfig
from drctl.models.health import ProbeStatus, RegionState
from drctl.models.passive import PassiveSignal
from drctl.models.watch import (
    WatchCarry,
    WatchCounts,
    WatchInput,
    WatchProgress,
    WatchResult,
    feed_passive,
    feed_probe,
    probe_period_s,
)
from drctl.providers.passive import PassiveReader
from drctl.providers.probe import InferenceProber
from drctl.telemetry import metrics

HEARTBEAT_S = 1.0


def _now() -> datetime:
    return datetime.now(UTC)


def _resume(inp: WatchInput) -> WatchProgress:
    """The last heartbeat's progress when this attempt is a retry, else a fresh start from the input."""
    details = activity.info().heartbeat_details
    if details:
        progress = WatchProgress.model_validate(details[0])
        progress.resumed += 1
        activity.logger.info("watcher resumes from its last heartbeat (%d rounds done)", progress.rounds)
        # Regions the monitor added or removed since are its to decide; keep only the ones asked for.
        progress.trackers = {r: progress.trackers.get(r) or inp.trackers[r] for r in inp.trackers}
        return progress
    # A copy: the progress changes as the watch goes, the input stays what the monitor sent.
    return WatchProgress(started_at=_now(), **inp.model_dump(include=set(WatchCarry.model_fields)))


class WatchActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self.prober = InferenceProber(cfg)
        self.reader: PassiveReader | None = None

    @activity.defn(name="watch_regions")
    async def watch_regions(self, inp: WatchInput) -> WatchResult:
        progress = _resume(inp)
        beat = asyncio.create_task(self._heartbeat(lambda: progress))
        reader = self._passive() if self.cfg.health.passive.enabled else None
        watch = asyncio.create_task(self._watch(inp, progress, reader))
        shutdown = asyncio.create_task(activity.wait_for_worker_shutdown())
        try:
            done, _ = await asyncio.wait([watch, shutdown], return_when=asyncio.FIRST_COMPLETED)
            if watch in done:
                return watch.result()
            # A worker restarting: give the work to another worker now, not after the heartbeat timeout.
            activity.heartbeat(progress)
            raise ApplicationError(
                "worker shutting down; the watcher resumes on another worker", type="WorkerShutdown"
            )
        finally:
            for task in (watch, shutdown, beat):
                task.cancel()
            await asyncio.gather(watch, shutdown, beat, return_exceptions=True)

    def _passive(self) -> PassiveReader:
        """One reader for the worker's life: its windows outlive a watcher call, so the call after a
        transition judges a breach from its first read instead of waiting for a window to fill."""
        if self.reader is None:
            self.reader = PassiveReader(self.cfg, self.prober.replica_source)
        return self.reader

    @staticmethod
    async def _heartbeat(progress: Callable[[], WatchProgress]) -> None:
        while True:
            activity.heartbeat(progress())
            await asyncio.sleep(HEARTBEAT_S)

    async def _watch(self, inp: WatchInput, p: WatchProgress, reader: PassiveReader | None) -> WatchResult:
        known, unresolved = known_regions(self.cfg, inp.regions)
        if unresolved != p.unresolved:
            return self._result(p, [], "unresolved", unresolved=unresolved)
        deadline = p.started_at + timedelta(seconds=inp.return_after_s)
        next_probe = _now()
        passive_s = self.cfg.health.passive.interval_s
        next_read = _now()
        breaching: set[str] = set()  # regions whose latest passive read breached its limits
        while True:
            changed: list[str] = []
            now = _now()
            if reader is not None and now >= next_read:
                next_read = now + timedelta(seconds=passive_s)
                verdicts = await reader.read()
                breaching = {v.region for v in verdicts if v.signal is PassiveSignal.SUSPECT}
                for v in verdicts:
                    t = p.trackers.get(v.region)
                    if t is not None and feed_passive(t, v, _now(), p.quiet_until.get(v.region)):
                        changed.append(v.region)
                p.passive_reads += 1
                if changed:
                    # Return the suspicion with its passive reason before any probe overwrites it: the
                    # monitor and `monitor status` see why, and the next call confirms with a probe at once.
                    return self._result(p, changed, "transition")
            if _now() >= next_probe:
                refused = await self._probe_round(inp, known, p, changed, breaching)
                next_probe = _now() + timedelta(seconds=probe_period_s(p.trackers, inp))
                if refused != p.refused:
                    p.refused = refused
                    return self._result(p, changed, "transition")
            if changed:
                return self._result(p, changed, "transition")
            if _now() >= deadline:
                return self._result(p, [], "checkpoint")
            wake = min([next_probe, deadline] + ([next_read] if reader is not None else []))
            await asyncio.sleep(max(0.0, (wake - _now()).total_seconds()))

    async def _probe_round(
        self, inp: WatchInput, known: list[str], p: WatchProgress, changed: list[str], breaching: set[str]
    ) -> list[str]:
        probes = await self.prober.probe_regions(known)
        confirm = self.cfg.health.passive.confirm_probes
        refused = []
        at = _now()
        for probe in probes:
            metrics.record_probe(self.cfg.name, probe, time.time())
            t = p.trackers.get(probe.region)
            if t is None:
                continue
            if probe.status is ProbeStatus.AUTH:
                refused.append(probe.region)
            before, was_saturated = t.state, t.saturated
            if feed_probe(t, probe, at, inp, confirm if probe.region in breaching else None):
                changed.append(probe.region)
                activity.logger.info("region %s is now %s (%s)", t.region, t.state.value, probe.reason)
                if before is RegionState.SUSPECT and t.state is RegionState.HEALTHY:
                    # A probe cleared a suspicion: passive breaches wait one interval before the next.
                    p.quiet_until[t.region] = at + timedelta(seconds=inp.interval_s)
            if t.saturated is not None and was_saturated is None:
                activity.logger.info("region %s: %s; the rebalance sheds its excess", t.region, t.saturated)
        p.rounds += 1
        return refused

    @staticmethod
    def _result(
        p: WatchProgress, changed: list[str], reason: Any, unresolved: dict[str, str] | None = None
    ) -> WatchResult:
        counts = p.model_dump(include=set(WatchCounts.model_fields))
        if unresolved is not None:
            counts["unresolved"] = unresolved
        return WatchResult(changed=list(dict.fromkeys(changed)), reason=reason, **counts)


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(WatchActivities(cfg))
