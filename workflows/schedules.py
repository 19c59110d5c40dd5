"""BackupScheduleChange (`schedule/<fleet>/<id>`): `drctl backup schedule create|delete`, written by
the workers.

A Velero Schedule is declarative configuration of each region's cluster, not an operation: like a
FleetRead (workflows/reads.py) it takes no fleet lock and carries no DrctlFleet/DrctlOperation
search attributes. Each region's Schedule is written by that region's own worker, so the CLI needs
only Temporal; every region answers on its own part, and a region without a worker is "no worker
polling <queue>" while the others are still written.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from drctl.models.reads import NO_WORKER, ReadPart, ReadResult, ScheduleChange, ScheduleWrite, no_worker
    from workflows import calls
    from workflows.reads import failed_part


@workflow.defn(name="BackupScheduleChange")
class BackupScheduleChange:
    @workflow.run
    async def run(self, inp: ScheduleChange) -> ReadResult:
        res = ReadResult()

        async def one(region: str) -> None:
            key, q = f"schedule/{region}", inp.queues[region]
            if q in inp.no_worker:
                res.parts[key] = ReadPart(error=no_worker(q), kind=NO_WORKER, queue=q)
                return
            w = ScheduleWrite(
                region=region,
                action=inp.action,
                name=inp.name,
                schedule=inp.schedule,
                ttl=inp.ttl,
                labels=inp.labels,
            )
            write = calls.create_schedule if inp.action == "create" else calls.delete_schedule
            try:
                value: BaseModel = await write(w, queue=q, wait_s=inp.queue_wait_s)
            except (ActivityError, ApplicationError) as exc:
                res.parts[key] = failed_part(exc, q)
                return
            res.parts[key] = ReadPart(value=value.model_dump(mode="json"), queue=q)

        await asyncio.gather(*(one(r) for r in inp.regions))
        return res


WORKFLOWS = [BackupScheduleChange]
