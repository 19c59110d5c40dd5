"""Catch `acquire_fleet` in flight: the fleet lock's own worker is gone, so the lock answers late.

`acquire_fleet` only sends an update to `lock/<fleet>` and waits for the answer, which a worker
gives in milliseconds; nothing outside Temporal can be stalled to hold it. What can hold it is
what happens when a worker dies: Temporal sends a workflow's next task to the sticky queue of the
worker that ran its last one, and gives a dead worker's sticky queue its schedule-to-start timeout
(10 s, the SDK default) before handing the task to any other worker. So the suite leaves the lock
as a crash would: held by an earlier run of the same operation that died without releasing (the
next run's acquire evicts it, workflows/lock.py `_judge`), its last task run by a worker that is
then SIGKILLed. The operation's acquire is in flight for those 10 s, and its worker is killed then.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio.client import Client, WithStartWorkflowOperation
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy

from drctl.config.schema import FleetConfig
from drctl.models import search_attributes as sa
from drctl.models.lock import UPDATE_ACQUIRE, Holder, LockGrant, LockInput, LockRequest, lock_id

if TYPE_CHECKING:  # the harness imports this module
    from tests.crash.harness import RegionWorkers


@dataclass
class Stranded:
    """The region whose worker ran the lock's last task and was killed, and the task restarting it."""

    region: str
    restarting: asyncio.Task[Any]


async def strand_lock(client: Client, cfg: FleetConfig, workers: RegionWorkers, operation: str) -> Stranded:
    """Leave `lock/<fleet>` held by a dead run of `<operation>/<fleet>`, its worker SIGKILLed.

    Returns the region and the task restarting its worker: the operation must start at once, while
    Temporal still counts the dead worker's sticky queue as polled, or it skips it.
    """
    fleet = cfg.name
    stale = Holder(workflow_id=f"{operation}/{fleet}", run_id="run-that-crashed", operation=operation)
    start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
        "FleetLock",
        LockInput(fleet=fleet),
        id=lock_id(fleet),
        task_queue=cfg.temporal.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(sa.FLEET, fleet), SearchAttributePair(sa.OPERATION, "lock")]
        ),
    )
    grant = await client.execute_update_with_start_workflow(
        UPDATE_ACQUIRE,
        LockRequest(fleet=fleet, holder=stale),
        start_workflow_operation=start,
        result_type=LockGrant,
    )
    assert grant.granted, grant
    history = await client.get_workflow_handle(lock_id(fleet)).fetch_history()
    done = [
        e.workflow_task_completed_event_attributes.identity
        for e in history.events
        if e.HasField("workflow_task_completed_event_attributes")
    ]
    region = workers.region_of(done[-1])
    workers.kill(region)
    return Stranded(region, asyncio.create_task(workers.start(region)))
