"""The worker's scrape-time reader: fleet-wide figures that no single activity observes.

On each scrape (at most once per `min_interval_s`) it asks Temporal, never workflow code:
- the FleetMonitor's `status` query for each region's state, and whether the monitor runs
  (a query adds no history events, unlike an activity per round);
- visibility for running operations and their phase;
- the global tier for the current weights (at most every `weights_interval_s`);
- each region queue's live pollers, the approvals left waiting, the drill schedules' latest runs
  and the results of finished maintenance operations and drills (at most every `slow_interval_s`;
  drctl/worker/operation_metrics.py).

At start and then every `history_interval_s` it reads the drill history and Velero backups, so
"last passing drill" and "last successful backup" survive a worker restart instead of resetting
to nothing (which would silence, or falsely fire, the alerts built on them).
Every read is bounded by a timeout; a failed read leaves the previous figures and is logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime

from temporalio.client import Client, WorkflowExecutionStatus

from drctl.client.operations import describe_or_none, list_operations, visibility_query
from drctl.config.schema import FleetConfig
from drctl.models.monitor import MonitorStatus
from drctl.models.rpo import replica_pairs
from drctl.providers.traffic_factory import global_traffic
from drctl.providers.velero import VeleroBackupProvider
from drctl.telemetry import metrics
from drctl.worker import operation_metrics

log = logging.getLogger("drctl.metrics")


class FleetReader:
    def __init__(
        self,
        cfg: FleetConfig,
        client: Client,
        *,
        min_interval_s: float = 1.0,
        weights_interval_s: float = 5.0,
        history_interval_s: float = 600.0,
        slow_interval_s: float = 15.0,
        timeout_s: float = 3.0,
    ) -> None:
        self.cfg = cfg
        self.client = client
        self.min_interval_s = min_interval_s
        self.weights_interval_s = weights_interval_s
        self.history_interval_s = history_interval_s
        self.slow_interval_s = slow_interval_s
        self.timeout_s = timeout_s
        self._last = self._last_weights = self._last_history = self._last_slow = float("-inf")
        self._lock = asyncio.Lock()
        self._history_task: asyncio.Task[None] | None = None
        self._velero: dict[str, VeleroBackupProvider] = {}
        metrics.init_fleet(
            cfg.name,
            cfg.region_names,
            cfg.objectives.rto_target_s,
            cfg.backup.max_age_s,
            cfg.objectives.rpo_target_s,
        )
        metrics.init_replicas(cfg.name, replica_pairs(cfg), time.time())

    async def refresh(self) -> None:
        async with self._lock:  # concurrent scrapes share one read
            now = time.monotonic()
            if now - self._last < self.min_interval_s:
                return
            self._last = now
            reads = [self._monitor(), self._operations()]
            if now - self._last_weights >= self.weights_interval_s:
                self._last_weights = now
                reads.append(asyncio.to_thread(self._weights))
            if now - self._last_slow >= self.slow_interval_s:
                self._last_slow = now
                reads += [
                    operation_metrics.read_pollers(self.client, self.cfg),
                    operation_metrics.read_schedules(self.client, self.cfg),
                    operation_metrics.read_results(self.client, self.cfg),
                ]
            if now - self._last_history >= self.history_interval_s and self._history_task is None:
                # In the background: listing S3 and every cluster may take longer than a scrape may.
                self._last_history = now
                self._history_task = asyncio.create_task(asyncio.to_thread(self._history))
                self._history_task.add_done_callback(self._history_done)
            results = await asyncio.gather(
                *(asyncio.wait_for(r, self.timeout_s) for r in reads), return_exceptions=True
            )
            for r in results:
                if isinstance(r, BaseException):
                    log.warning("metrics read failed: %s", r or type(r).__name__)

    async def _monitor(self) -> None:
        fleet = self.cfg.name
        handle = self.client.get_workflow_handle(f"monitor/{fleet}")
        desc = await describe_or_none(handle)
        running = desc is not None and desc.status == WorkflowExecutionStatus.RUNNING
        metrics.MONITOR_RUNNING.labels(fleet=fleet).set(1 if running else 0)
        if not running:
            # No monitor, no state: an old figure would read as a region still being watched.
            metrics.REGION_STATE.clear()
            metrics.record_monitor_alert(fleet, None)
            return
        status = await handle.query("status", result_type=MonitorStatus)
        metrics.record_monitor_alert(fleet, status.alert)
        metrics.record_region_states(fleet, {r: t.state.value for r, t in status.regions.items()})

    async def _operations(self) -> None:
        fleet = self.cfg.name
        ops = await list_operations(self.client, fleet, visibility_query(fleet), None)
        metrics.OPERATIONS.clear()
        for op in ops:
            metrics.OPERATIONS.labels(fleet=fleet, operation=op.operation, phase=op.phase or "pending").inc()
        await operation_metrics.read_approvals(self.client, self.cfg, ops)

    def _history_done(self, task: asyncio.Task[None]) -> None:
        self._history_task = None
        if not task.cancelled() and task.exception() is not None:
            log.warning("reading drill and backup history for metrics failed: %s", task.exception())

    def _weights(self) -> None:
        metrics.record_weights(self.cfg.name, global_traffic(self.cfg).get_weights())

    def _history(self) -> None:
        # Imported here: the report store lives with the activities that write it.
        from drctl.providers.drill_reports import ReportStore

        fleet = self.cfg.name
        try:
            passed = [r for r in ReportStore(self.cfg).list(fleet, limit=50) if r.verdict.value == "PASS"]
            if passed:
                newest = max(r.finished_at for r in passed)
                metrics.set_if_newer(metrics.LAST_PASSING_DRILL.labels(fleet=fleet), newest.timestamp())
        except Exception as exc:  # noqa: BLE001 - the next read tries again
            log.warning("reading drill history for metrics failed: %s", exc)
        for region in self.cfg.region_names:
            try:
                velero = self._velero.setdefault(region, VeleroBackupProvider(self.cfg, region))
                done = [b for b in velero.list_backups() if b.phase == "Completed" and b.completed]
            except Exception as exc:  # noqa: BLE001
                log.warning("listing backups in %s for metrics failed: %s", region, exc)
                continue
            if done:
                newest_ts = max(_ts(b.completed or "") for b in done)
                metrics.set_if_newer(metrics.LAST_BACKUP.labels(fleet=fleet, region=region), newest_ts)


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
