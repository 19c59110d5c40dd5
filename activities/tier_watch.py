"""The tier watch: the global tier read every `interval_s` inside one heartbeating activity.

Returns only when what it reads differs from what the monitor last saw (drctl.models.tier_watch):
weights that changed, a region the data plane took out of rotation or put back, the tier becoming
unreadable or readable again; or when `return_after_s` is up. Before returning a change it says who
may have made it: the fleet's drctl operations running, or closed since the read before (Temporal
visibility), and, for weights no operation set, the break-glass audit record that set them.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio import activity
from temporalio.client import WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError

from activities.defined import activity_methods
from drctl.client.imports import WORKFLOW, start_import
from drctl.config.schema import FleetConfig
from drctl.models.breakglass import BreakGlassRecord
from drctl.models.lock import MUTATING
from drctl.models.tier_watch import TierSeen, TierWatchInput, TierWatchResult, differs
from drctl.providers import aws
from drctl.providers.base import GlobalTraffic
from drctl.providers.errors import classify
from drctl.providers.traffic_factory import global_traffic

HEARTBEAT_S = 1.0
BREAKGLASS_PREFIX = "breakglass"
# Bounds on the audit lookup: the newest records only, each read to a size cap.
RECORDS_READ = 5
RECORD_BYTES = 4 * 1024 * 1024
# Operations closed this long before the read before are still candidates (clocks of hosts differ).
CLOSE_MARGIN_S = 1.0
MARGIN = timedelta(seconds=CLOSE_MARGIN_S)
IMPORTED = WORKFLOW  # workflows/imported.py


def _now() -> datetime:
    return datetime.now(UTC)


class TierWatchActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self._tier: GlobalTraffic | None = None

    def _read(self, expected: TierSeen | None) -> TierSeen:
        """One reading; the regions out keep their last value when only that part cannot be read
        (a failed status call is not a region leaving rotation)."""
        at = _now()
        try:
            if self._tier is None:
                self._tier = global_traffic(self.cfg)
            weights = self._tier.get_weights()
        except Exception as exc:  # noqa: BLE001 - any failure to read is what the monitor is told
            return TierSeen(error=classify(exc, "read global weights").message[:500], at=at)
        try:
            out = self._tier.data_plane_out()
        except Exception as exc:  # noqa: BLE001
            activity.logger.warning("data plane state of the global tier not read: %s", exc)
            out = dict(expected.out) if expected is not None else {}
        return TierSeen(weights=weights, out=out, at=at)

    @activity.defn(name="watch_global_tier")
    async def watch_global_tier(self, inp: TierWatchInput) -> TierWatchResult:
        started = time.monotonic()
        reads = 0
        previous_at = inp.expected.at if inp.expected is not None else None
        while True:
            seen = await asyncio.to_thread(self._read, inp.expected)
            reads += 1
            if differs(inp.expected, seen):
                return await self._result(inp, seen, reads, previous_at)
            previous_at = seen.at
            if time.monotonic() - started >= inp.return_after_s:
                return TierWatchResult(seen=seen, changed=False, reads=reads)
            # Sleep in heartbeat-sized steps: a cancel (monitor stop, continue-as-new) lands at once.
            wake = time.monotonic() + inp.interval_s
            while (left := wake - time.monotonic()) > 0:
                activity.heartbeat(reads)
                await asyncio.sleep(min(HEARTBEAT_S, left))
                if activity.is_worker_shutdown():
                    raise ApplicationError("worker shutting down; the tier watch goes on elsewhere")

    async def _result(
        self, inp: TierWatchInput, seen: TierSeen, reads: int, previous_at: datetime | None
    ) -> TierWatchResult:
        out = TierWatchResult(seen=seen, changed=True, reads=reads)
        expected = inp.expected
        if expected is None or expected.weights is None or seen.weights in (None, expected.weights):
            return out  # the first read, or no weight changed: nobody to name
        try:
            out.by_drctl = await self._operations(inp.fleet, previous_at)
        except Exception as exc:  # noqa: BLE001 - unattributed is recorded as such, never a crash
            activity.logger.warning("operations of fleet %s not listed: %s", inp.fleet, exc)
        if not out.by_drctl:
            try:
                found = await asyncio.to_thread(self._breakglass, seen.weights or {})
            except Exception as exc:  # noqa: BLE001
                activity.logger.warning("break-glass records of fleet %s not read: %s", inp.fleet, exc)
                found = None
            if found is not None:
                rec, out.breakglass = found
                out.breakglass_line = rec.line()
                out.imported = await self._import(rec, out.breakglass)
        activity.logger.info(
            "global tier changed: %s → %s; drctl operations: %s; break-glass record: %s",
            expected.weights,
            seen.weights,
            out.by_drctl or "none",
            out.breakglass or "none",
        )
        return out

    async def _operations(self, fleet: str, since: datetime | None) -> list[str]:
        """Workflow ids of the fleet's mutating operations that may have moved the weights since
        `since`: running now, or closed after it. Visibility finds the candidates; each one's own
        description (read from its history, not from the lagging visibility store) decides."""
        ops = ", ".join(f"'{o}'" for o in MUTATING)
        closed = ""
        if since is not None:
            after = (since - timedelta(seconds=CLOSE_MARGIN_S)).strftime("%Y-%m-%dT%H:%M:%SZ")
            closed = f" OR CloseTime > '{after}'"
        # An imported break-glass move is recorded, not made, by its workflow: it never moves weights.
        query = (
            f"DrctlFleet = '{fleet}' AND DrctlOperation IN ({ops}) AND WorkflowType != '{IMPORTED}' "
            f"AND (ExecutionStatus = 'Running'{closed})"
        )
        client = activity.client()
        ids: set[str] = set()
        async for ex in client.list_workflows(query, limit=20):
            desc = await client.get_workflow_handle(ex.id, run_id=ex.run_id).describe()
            if desc.status == WorkflowExecutionStatus.RUNNING:
                ids.add(ex.id)
            elif since is None or (desc.close_time is not None and desc.close_time >= since - MARGIN):
                ids.add(ex.id)
        return sorted(ids)

    async def _import(self, rec: BreakGlassRecord, uri: str) -> str | None:
        """Import the record as `drctl failover-import` would (once per record): the move shows in
        `drctl ops list` and the Temporal UI. Not awaited: the import tells the monitor itself."""
        try:
            # Who imported it, as the monitor's automatic operations name it (DrctlInitiator).
            who = f"drctl-monitor@monitor/{self.cfg.name} (tier watch)"
            _, again = await start_import(activity.client(), self.cfg, rec, uri, who)
        except Exception as exc:  # noqa: BLE001 - the record is still named; the operator can import it
            activity.logger.warning("break-glass record %s not imported: %s", uri, exc)
            return None
        return f"{rec.workflow_id} (imported before)" if again else rec.workflow_id

    def _breakglass(self, weights: dict[str, int]) -> tuple[BreakGlassRecord, str] | None:
        """The newest succeeded break-glass record of this fleet whose weights read back are `weights`."""
        bucket = self.cfg.failover.audit_bucket or self.cfg.drills.history_bucket
        s3 = aws.client(self.cfg, "s3")
        prefix = f"{BREAKGLASS_PREFIX}/{self.cfg.name}/"
        keys: list[str] = []
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        for _ in range(10):  # 10,000 keys at most: the newest few are all that is read
            page = s3.list_objects_v2(**kwargs)
            keys += [o["Key"] for o in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                break
            kwargs["ContinuationToken"] = page["NextContinuationToken"]
        for key in sorted(keys, reverse=True)[:RECORDS_READ]:
            body = s3.get_object(Bucket=bucket, Key=key)["Body"].read(RECORD_BYTES + 1)
            if len(body) > RECORD_BYTES:
                continue
            try:
                rec = BreakGlassRecord.model_validate(json.loads(body))
            except ValueError:
                continue
            if rec.problem_for(self.cfg.name, self.cfg.region_names) is None and rec.weights_after == weights:
                return rec, f"s3://{bucket}/{key}"
        return None


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(TierWatchActivities(cfg))
