"""Ask the workers to read the fleet: one short FleetRead workflow (workflows/reads.py) per question.

Before starting it, DescribeTaskQueue says which queues have a worker polling: with none on the
main queue nothing would run the read, so that is an error at once (NoWorkerError); a region queue
with none is answered "no worker polling <queue>" without being asked. A worker that died since its
last poll is caught by the read's schedule-to-start instead, within `queue_wait_s`.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from drctl.config.schema import FleetConfig
from drctl.models.reads import ReadInput, ReadResult, ReadWhat, ScheduleChange, no_worker
from drctl.models.safe_text import SUMMARY_CHARS, safe_text

# A poller counts while it polled within this window. A live worker's long poll returns and is
# renewed at least every minute; Temporal keeps a dead poller listed for minutes after its last poll.
POLLER_FRESH_S = 70.0
# A queue without a poller is asked again for this long before it counts as unserved.
SETTLE_S, SETTLE_POLL_S = 3.0, 0.3
# How long a read may take in all, unless the caller says otherwise (`--timeout`).
READ_TIMEOUT_S = 60.0


class NoWorkerError(RuntimeError):
    """Nobody polls the main task queue: no worker would run the read."""

    def __init__(self, queue: str) -> None:
        super().__init__(
            f"{no_worker(queue)}: start one with `drctl worker` (dev stack: `drctl dev up --workers`)"
        )
        self.queue = queue


class ReadTimeout(RuntimeError):
    """The read did not finish in time (a stuck worker or a slow dependency)."""


async def polled(client: Client, queue: str, kind: TaskQueueType.ValueType) -> bool:
    """Whether a worker polled `queue` (workflow or activity tasks) within POLLER_FRESH_S."""
    try:
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace, task_queue=TaskQueue(name=queue), task_queue_type=kind
            )
        )
    except RPCError:
        # Not allowed to describe queues (a narrow API-key role), or the call failed: no answer here,
        # so the read goes ahead and its schedule-to-start bounds the wait for a worker.
        return True
    now = datetime.now(UTC)
    return any(
        (now - p.last_access_time.ToDatetime(tzinfo=UTC)).total_seconds() <= POLLER_FRESH_S
        for p in resp.pollers
    )


async def _unpolled(client: Client, main: str, queues: list[str]) -> set[str]:
    """The queues (the main one's workflow tasks, the regions' activity tasks) nobody polls, asked
    again for up to SETTLE_S: a worker that has just started may not have polled yet."""
    kinds = {main: TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW} | {
        q: TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY for q in queues
    }
    unseen = set(kinds)
    deadline = time.monotonic() + SETTLE_S
    while True:
        asked = sorted(unseen)
        seen = await asyncio.gather(*(polled(client, q, kinds[q]) for q in asked))
        unseen = {q for q, ok in zip(asked, seen, strict=True) if not ok}
        if not unseen or time.monotonic() >= deadline:
            return unseen
        await asyncio.sleep(SETTLE_POLL_S)


async def _queues(client: Client, cfg: FleetConfig, regions: list[str] | None) -> tuple[list[str], list[str]]:
    """The regions asked for and the queues among theirs nobody polls; NoWorkerError if the main one."""
    main = cfg.temporal.task_queue
    wanted = cfg.region_names if regions is None else regions
    unseen = await _unpolled(client, main, sorted({cfg.region(r).queue for r in wanted}))
    if main in unseen:
        raise NoWorkerError(main)
    return wanted, sorted(unseen)


async def _execute(
    client: Client, cfg: FleetConfig, workflow: str, inp: Any, kind: str, label: str, timeout_s: float
) -> ReadResult:
    """Run `workflow` (a FleetRead or a BackupScheduleChange) on the main queue, bounded by `timeout_s`."""
    main = cfg.temporal.task_queue
    try:
        return await client.execute_workflow(
            workflow,
            inp,
            id=f"{kind}/{cfg.name}/{uuid.uuid4().hex[:12]}",
            task_queue=main,
            result_type=ReadResult,
            # What the Temporal UI's list shows for it: a read or a schedule change, not an operation.
            static_summary=safe_text(f"drctl {kind}: {label} of fleet {cfg.name}", limit=SUMMARY_CHARS),
            # Bounded on the server too: a request nobody finishes must not linger as a running workflow.
            execution_timeout=timedelta(seconds=timeout_s),
            run_timeout=timedelta(seconds=timeout_s),
        )
    except WorkflowFailureError as exc:
        raise ReadTimeout(
            f"the {kind} of {label} did not finish within {timeout_s:g} s ({exc.cause or exc}); "
            f"are the workers on {main} stuck?"
        ) from None
    except RPCError as exc:
        raise ReadTimeout(f"the {kind} of {label} failed in Temporal: {exc.message}") from None


async def read_fleet(
    client: Client,
    cfg: FleetConfig,
    what: ReadWhat,
    *,
    regions: list[str] | None = None,
    timeout_s: float = READ_TIMEOUT_S,
    **more: Any,
) -> ReadResult:
    """Run one FleetRead on the main queue and return its parts; `more` fills ReadInput (name, limit, ...)."""
    wanted, unseen = await _queues(client, cfg, regions)
    inp = ReadInput(
        fleet=cfg.name,
        what=what,
        queues={r.name: r.queue for r in cfg.regions},
        regions=wanted,
        no_worker=unseen,
        probe_timeout_s=cfg.health.probe_timeout_s,
        **more,
    )
    return await _execute(client, cfg, "FleetRead", inp, "read", what, timeout_s)


async def change_schedules(
    client: Client,
    cfg: FleetConfig,
    action: Literal["create", "delete"],
    name: str,
    regions: list[str],
    *,
    timeout_s: float = READ_TIMEOUT_S,
    **more: Any,
) -> ReadResult:
    """Create or delete Velero Schedule `name` in `regions`, each by its region's worker; `more` fills
    ScheduleChange (schedule, ttl, labels). One part per region, `schedule/<region>`."""
    wanted, unseen = await _queues(client, cfg, regions)
    inp = ScheduleChange(
        fleet=cfg.name,
        action=action,
        name=name,
        queues={r.name: r.queue for r in cfg.regions},
        regions=wanted,
        no_worker=unseen,
        **more,
    )
    return await _execute(client, cfg, "BackupScheduleChange", inp, "schedule", f"{action} {name}", timeout_s)
