"""FleetRead (`read/<fleet>/<id>`): the CLI's reads of the fleet, done by the workers.

The CLI needs nothing but Temporal, as the Temporal CLI and `kubectl argo rollouts` need nothing but
their API: `drctl status`, `failover --dry-run`, `backup list|describe`, `backup schedule list` and
`drill history|report` start one short FleetRead and render its answer. Per-region reads go to that
region's own queue, fleet-wide ones (global weights, probes, S3, rclone) to the main queue, each
waiting `queue_wait_s` at most for a worker. Every part answers on its own: one region without a
worker is "no worker polling <queue>" in its part, and the others are still read.

Read-only: it takes no fleet lock and carries no DrctlFleet/DrctlOperation search attributes, so
`ops list`, `status` and the busy check never see it as an operation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from drctl.models.activity_io import ProbeRequest, RegionRequest
    from drctl.models.backup import BackupName
    from drctl.models.reads import (
        NO_WORKER,
        DrillHistoryRequest,
        DrillReportRequest,
        ReadInput,
        ReadPart,
        ReadResult,
        no_worker,
    )
    from workflows import calls
    from workflows.failover_phases import plan_preflight
    from workflows.operation import innermost
    from workflows.operation import no_worker as unserved


def failed_part(exc: BaseException, queue: str | None) -> ReadPart:
    """A part that failed: no worker on its queue, or the error its activity raised (kind: its type)."""
    if queue is not None and unserved(exc, queue):
        return ReadPart(error=no_worker(queue), kind=NO_WORKER, queue=queue)
    inner = innermost(exc)
    kind = inner.type if isinstance(inner, ApplicationError) else type(inner).__name__
    message = inner.message if isinstance(inner, ApplicationError) else str(inner)
    return ReadPart(error=message, kind=kind, queue=queue)


# The reads of one region, each on that region's queue: part key -> activity stub.
REGION_READS: dict[str, Callable[..., Awaitable[Any]]] = {
    "capacity": calls.read_capacity,
    "release": calls.read_release,
    "last_backup": calls.last_backup,
    "backups": calls.list_backups,
    "schedules": calls.list_schedules,
}


@workflow.defn(name="FleetRead")
class FleetRead:
    def __init__(self) -> None:
        self.res = ReadResult()
        self.jobs: dict[str, tuple[str | None, Awaitable[Any]]] = {}

    @workflow.run
    async def run(self, inp: ReadInput) -> ReadResult:
        main = workflow.info().task_queue
        wait = inp.queue_wait_s
        if inp.what == "status":
            probe = ProbeRequest(regions=inp.regions)
            self.jobs["weights"] = (main, calls.get_global_weights(summary="read global weights"))
            self.jobs["probes"] = (
                main,
                calls.probe_regions(probe, probe_timeout_s=inp.probe_timeout_s, summary="probe"),
            )
            self._per_region(inp, "capacity", *(("release", "last_backup") if inp.data else ()))
            if inp.data:
                self.jobs["lags"] = (main, calls.measure_lags(wait_s=wait))
        elif inp.what in ("backups", "schedules"):
            self._per_region(inp, inp.what)
        elif inp.what == "failover_plan":
            assert inp.failover is not None
            self._each(inp, [inp.failover.target], "plan", lambda r, q: self._plan(inp, q))
        elif inp.what == "backup":
            name = inp.name or ""
            self._each(
                inp,
                inp.regions,
                "backup",
                lambda r, q: calls.describe_backup(BackupName(region=r, name=name), queue=q, wait_s=wait),
            )
        elif inp.what == "drill_history":
            req = DrillHistoryRequest(fleet=inp.fleet, limit=inp.limit)
            self.jobs["drill_history"] = (main, calls.drill_history(req, wait_s=wait))
        elif inp.what == "drill_report":
            report = DrillReportRequest(drill_id=inp.name or "")
            self.jobs["drill_report"] = (main, calls.drill_report(report, wait_s=wait))
        await asyncio.gather(*(self._part(key, queue, job) for key, (queue, job) in self.jobs.items()))
        return self.res

    def _per_region(self, inp: ReadInput, *keys: str) -> None:
        """Each of `keys` (REGION_READS) for every region of `inp`, each on its region's queue."""

        def reader(key: str) -> Callable[[str, str], Awaitable[Any]]:
            read = REGION_READS[key]
            return lambda r, q: read(RegionRequest(region=r), queue=q, wait_s=inp.queue_wait_s)

        for key in keys:
            self._each(inp, inp.regions, key, reader(key))

    def _each(
        self, inp: ReadInput, regions: list[str], key: str, read: Callable[[str, str], Awaitable[Any]]
    ) -> None:
        """`key/<region>` for each region, read on the region's queue unless the CLI saw nobody polling it."""
        for r in regions:
            q = inp.queues[r]
            if q in inp.no_worker:
                self.res.parts[f"{key}/{r}"] = ReadPart(error=no_worker(q), kind=NO_WORKER, queue=q)
            else:
                self.jobs[f"{key}/{r}"] = (q, read(r, q))

    async def _plan(self, inp: ReadInput, tq: str) -> Any:
        # The Failover's own preflight reads and planner, on the target's queue as the failover does.
        assert inp.failover is not None
        plan, _, _ = await plan_preflight(inp.failover, tq)
        return plan

    async def _part(self, key: str, queue: str | None, job: Awaitable[Any]) -> None:
        try:
            value = await job
        except (ActivityError, ApplicationError) as exc:
            self.res.parts[key] = failed_part(exc, queue)
            return
        self.res.parts[key] = ReadPart(
            value=value.model_dump(mode="json") if isinstance(value, BaseModel) else value, queue=queue
        )


WORKFLOWS = [FleetRead]
