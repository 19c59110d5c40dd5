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
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from drctl.config.schema import FleetConfig
from drctl.models.reads import ReadInput, ReadResult, ReadWhat, no_worker

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
    main = cfg.temporal.task_queue
    queues = {r.name: r.queue for r in cfg.regions}
    wanted = cfg.region_names if regions is None else regions
    asked = sorted({queues[r] for r in wanted})
    unseen = await _unpolled(client, main, asked)
    if main in unseen:
        raise NoWorkerError(main)
    inp = ReadInput(
        fleet=cfg.name,
        what=what,
        queues=queues,
        regions=wanted,
        no_worker=sorted(unseen),
        probe_timeout_s=cfg.health.probe_timeout_s,
        **more,
    )
    try:
        return await client.execute_workflow(
            "FleetRead",
            inp,
            id=f"read/{cfg.name}/{uuid.uuid4().hex[:12]}",
            task_queue=main,
            result_type=ReadResult,
            # What the Temporal UI's list shows for it: a read, not an operation.
            static_summary=f"drctl read: {what} of fleet {cfg.name}",
            # Bounded on the server too: a read nobody finishes must not linger as a running workflow.
            execution_timeout=timedelta(seconds=timeout_s),
            run_timeout=timedelta(seconds=timeout_s),
        )
    except WorkflowFailureError as exc:
        raise ReadTimeout(
            f"the read of {what} did not finish within {timeout_s:g} s ({exc.cause or exc}); "
            f"are the workers on {main} stuck?"
        ) from None
    except RPCError as exc:
        raise ReadTimeout(f"the read of {what} failed in Temporal: {exc.message}") from None
