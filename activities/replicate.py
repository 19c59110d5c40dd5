"""Replication activities: one rclone run per replica pair, lag measurement, the failover's RPO check.

Sync activities (rclone is a blocking subprocess) on the worker's thread pool. A transfer
heartbeats rclone's once-a-second stats, so a stuck copy shows in the UI and a dead worker is
noticed by the heartbeat timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.client import WorkflowQueryFailedError
from temporalio.service import RPCError

from activities.defined import activity_methods
from activities.errors import app_error
from drctl.config.schema import FleetConfig
from drctl.models.release import ParityReport, compare
from drctl.models.rpo import (
    ArtifactsInput,
    ArtifactsResult,
    ReplicaPair,
    ReplicateStatus,
    ReplicationRun,
    RpoCheck,
    RpoCheckInput,
    TransferStats,
    estimate_from_last_run,
    replica_pairs,
)
from drctl.providers.errors import ProviderError
from drctl.providers.rclone import Rclone
from drctl.providers.release import ReleaseReader
from drctl.telemetry import metrics


def _heartbeat(stats: TransferStats) -> None:
    activity.heartbeat(stats.model_dump())


class ReplicateActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self.rclone = Rclone(cfg)

    @activity.defn(name="replicate_pair")
    def replicate_pair(self, pair: ReplicaPair) -> ReplicationRun:
        """rclone copy|sync, then rclone check and the lag it leaves."""
        started = datetime.now(UTC)
        error = None
        try:
            stats = self.rclone.transfer(pair, on_progress=_heartbeat)
        except ProviderError as exc:
            if not exc.error.retryable:
                raise app_error(exc, f"replicate {pair.key}") from exc
            # A partial run still moved data; the check below tells how far behind it left the replica.
            stats, error = TransferStats(errors=1), str(exc)
        activity.heartbeat({"phase": "check"})
        lag = self.rclone.measure_lag(pair)
        metrics.record_lag(self.cfg.name, lag)
        return ReplicationRun(
            bucket=pair.bucket,
            source_region=pair.source_region,
            replica_region=pair.replica_region,
            mode=pair.mode,
            started_at=started,
            finished_at=datetime.now(UTC),
            ok=error is None and lag.error is None,
            stats=stats,
            check_ok=lag.error is None and lag.unreplicated == 0,
            lag=lag,
            error=error or lag.error,
        )

    @activity.defn(name="copy_artifacts")
    def copy_artifacts(self, inp: ArtifactsInput) -> ArtifactsResult:
        """A migration's model artifacts: copy each source bucket into its replica in the target, then check."""
        out = ArtifactsResult()
        for b in self.cfg.data.buckets:
            if b.source.region != inp.source:
                continue
            pair = next(
                (p for p in replica_pairs(self.cfg) if p.bucket == b.name and p.replica_region == inp.target),
                None,
            )
            if pair is None:
                out.skipped.append(b.name)
                continue
            out.runs.append(self.replicate_pair(pair))
        return out

    @activity.defn(name="check_rpo")
    async def check_rpo(self, inp: RpoCheckInput) -> RpoCheck:
        """Lag of every replica the target holds, against objectives.rpo_target_s (from the worker's config).

        Async so it can ask the Replicate workflow for its last runs; the blocking reads run in threads.
        """
        check = RpoCheck(target=inp.target, rpo_target_s=self.cfg.objectives.rpo_target_s)
        # One bound for the whole check, so it answers before its activity times out: the release
        # reads and the lag measurement run at once, and the fallback query gets what is left.
        deadline = time.monotonic() + inp.timeout_s

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        rclone = Rclone(self.cfg, timeout_s=inp.timeout_s)
        pairs = [p for p in replica_pairs(self.cfg) if p.replica_region == inp.target]
        lags = asyncio.gather(*(asyncio.to_thread(rclone.measure_lag, p, deadline) for p in pairs))
        if inp.parity and inp.sources:
            check.parity = await self._parity(inp, left())
        activity.heartbeat({"measuring": inp.target})
        reports = list(await lags)
        if any(r.error for r in reports):
            # A dead source region cannot be read; the last verified replication run bounds the loss.
            last = await self._last_runs(max(1.0, left()))
            now = datetime.now(UTC)
            reports = [
                estimate_from_last_run(p, last[p.key], now, r.error) if r.error and p.key in last else r
                for p, r in zip(pairs, reports, strict=True)
            ]
        for rep in reports:
            if rep.estimated_from is None:  # an estimate is the RPO check's bound, not a measurement
                metrics.record_lag(self.cfg.name, rep)
            check.reports.append(rep)
            if rep.error:
                check.errors.append(f"{rep.bucket}/{rep.replica_region}: {rep.error}")
            else:
                check.lag_s = max(check.lag_s or 0.0, rep.lag_s or 0.0)
                check.objects_behind += rep.unreplicated
        if check.errors:
            check.lag_s = None
        return check

    async def _parity(self, inp: RpoCheckInput, within_s: float) -> list[ParityReport]:
        """The target's release against each source's; a read that outlasts the bound is named."""
        reader = ReleaseReader(self.cfg)
        reads = asyncio.gather(*(asyncio.to_thread(reader.read, r) for r in [inp.target, *inp.sources]))
        try:
            rels = await asyncio.wait_for(reads, within_s)
        except TimeoutError:
            # The reads end on their own request timeouts; the check does not wait for them.
            why = f"releases not read within {within_s:g} s"
            return [ParityReport(source=s, target=inp.target, errors=[why]) for s in inp.sources]
        return [compare(src, rels[0]) for src in rels[1:]]

    async def _last_runs(self, within_s: float) -> dict[str, ReplicationRun]:
        try:
            st = (
                await activity.client()
                .get_workflow_handle(f"replicate/{self.cfg.name}")
                .query("status", result_type=ReplicateStatus, rpc_timeout=timedelta(seconds=within_s))
            )
        except (RPCError, WorkflowQueryFailedError, RuntimeError):
            # Replication not running, or its worker not answering within the bound: nothing to
            # estimate from, so the lag stays unknown.
            return {}
        return {ps.pair.key: ps.last_verified for ps in st.pairs if ps.last_verified is not None}


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(ReplicateActivities(cfg))
