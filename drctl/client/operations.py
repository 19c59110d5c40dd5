"""Client-side operation control: who holds the fleet, and starting an operation exclusively.

Used by every CLI that starts a mutating workflow. The check here is an early, friendly answer
read from visibility; the guarantee is the fleet lock (`workflows.lock`), which each workflow
takes first, so two clients racing past this check still end with one holder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from drctl.client.connection import ui_link
from drctl.config.schema import FleetConfig
from drctl.models import search_attributes as sa
from drctl.models.failover import MEMO_RELEASED, SIGNAL_SUPERSEDE, SupersedeNotice
from drctl.models.lock import MUTATING as MUTATING
from drctl.models.lock import blocks
from drctl.models.lock import compatible as compatible
from drctl.models.phases import PHASE_PENDING, OperationInfo
from drctl.models.safe_text import SUMMARY_CHARS, safe_markdown, safe_text


class FleetBusyError(RuntimeError):
    """Another mutating operation holds the fleet."""

    def __init__(self, fleet: str, running: OperationInfo) -> None:
        where = f" ({running.ui_link})" if running.ui_link else ""
        phase = f", phase {running.phase}" if running.phase else ""
        super().__init__(
            f"fleet {fleet!r} is busy: {running.operation} {running.workflow_id} is running{phase}{where}; "
            "wait for it to finish or abort it with `drctl ops abort`"
        )
        self.fleet = fleet
        self.running = running


async def describe_or_none(handle: WorkflowHandle[Any, Any]) -> WorkflowExecutionDescription | None:
    """The workflow's description; None when Temporal has no such workflow (other errors raise)."""
    try:
        return await handle.describe()
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        return None


def visibility_query(fleet: str) -> str:
    ops = ", ".join(f"'{o}'" for o in MUTATING)
    return f"DrctlFleet = '{fleet}' AND ExecutionStatus = 'Running' AND DrctlOperation IN ({ops})"


def operation_info(ex: WorkflowExecution, fleet: str, ui_base: FleetConfig | None = None) -> OperationInfo:
    attrs = ex.typed_search_attributes
    return OperationInfo(
        workflow_id=ex.id,
        run_id=ex.run_id,
        operation=attrs.get(sa.OPERATION) or "?",
        fleet=attrs.get(sa.FLEET) or fleet,
        phase=attrs.get(sa.PHASE),
        source=attrs.get(sa.SOURCE_REGION),
        target=attrs.get(sa.TARGET_REGION),
        status=ex.status.name if ex.status else "UNKNOWN",
        start_time=ex.start_time,
        ui_link=ui_link(ui_base, ex.id, ex.run_id) if ui_base else None,
        initiator=attrs.get(sa.INITIATOR),
    )


async def list_operations(
    client: Client, fleet: str, query: str, cfg: FleetConfig | None, limit: int = 50
) -> list[OperationInfo]:
    found: list[OperationInfo] = []
    async for ex in client.list_workflows(query, limit=limit):
        found.append(operation_info(ex, fleet, cfg))
    found.sort(key=lambda o: (o.start_time is None, o.start_time))
    return found


async def running_operations(client: Client, cfg: FleetConfig) -> list[OperationInfo]:
    """Mutating operations running on this fleet, oldest first."""
    return await list_operations(client, cfg.name, visibility_query(cfg.name), cfg)


def search_attributes(
    fleet: str,
    operation: str,
    source: str | None = None,
    target: str | None = None,
    initiator: str | None = None,
) -> TypedSearchAttributes:
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(sa.FLEET, fleet),
        SearchAttributePair(sa.OPERATION, operation),
        SearchAttributePair(sa.PHASE, PHASE_PENDING),
    ]
    if initiator:
        # Whatever the caller says it is (a record file's `who`): listed in the UI, so escaped.
        pairs.append(SearchAttributePair(sa.INITIATOR, safe_text(initiator, limit=SUMMARY_CHARS)))
    if source:
        pairs.append(SearchAttributePair(sa.SOURCE_REGION, source))
    if target:
        pairs.append(SearchAttributePair(sa.TARGET_REGION, target))
    return TypedSearchAttributes(pairs)


def memo_of(
    fleet: str,
    operation: str,
    initiator: str,
    source: str | None = None,
    target: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """An operation's memo, which the Temporal UI shows as it is: every text in it escaped and
    bounded (an initiator, a backup name or a record's URI is whatever the caller gave)."""
    memo = {"fleet": fleet, "operation": operation, "source": source, "target": target, **(extra or {})}
    memo["initiator"] = initiator
    return {k: safe_text(v, limit=SUMMARY_CHARS) if isinstance(v, str) else v for k, v in memo.items()}


def summary(operation: str, fleet: str, initiator: str, source: str | None, target: str | None) -> str:
    """The one line the Temporal UI shows for an operation: what, where, by whom."""
    route = " → ".join(r for r in (source, target) if r)
    line = f"{operation} of fleet {fleet}" + (f" ({route})" if route else "") + f" by {initiator}"
    return safe_text(line, limit=SUMMARY_CHARS)  # the initiator is whatever the caller says it is


async def start_operation(
    client: Client,
    cfg: FleetConfig,
    workflow_run_fn: Any,
    arg: Any,
    *,
    operation: str,
    workflow_id: str,
    task_queue: str | None = None,
    source: str | None = None,
    target: str | None = None,
    memo: Mapping[str, Any] | None = None,
    initiator: str | None = None,
) -> WorkflowHandle[Any, Any]:
    """Start a mutating operation unless one that blocks it runs; raises FleetBusyError naming it.

    A failover is never refused here for maintenance: it preempts it (see `drctl.models.lock`).
    `initiator` (default: the client's identity, which Temporal records on the start event too) goes
    to the DrctlInitiator search attribute, the memo and the UI's summary and details.
    """
    initiator = initiator or client.identity
    for op in await running_operations(client, cfg):
        if op.workflow_id != workflow_id and blocks(op.operation, operation):
            raise FleetBusyError(cfg.name, op)
    for attempt in range(2):
        try:
            return await client.start_workflow(
                workflow_run_fn,
                arg,
                id=workflow_id,
                task_queue=task_queue or cfg.temporal.task_queue,
                search_attributes=search_attributes(cfg.name, operation, source, target, initiator),
                memo=memo_of(cfg.name, operation, initiator, source, target, memo),
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                static_summary=summary(operation, cfg.name, initiator, source, target),
                static_details=f"**initiated by** {safe_markdown(initiator, limit=SUMMARY_CHARS)}",
            )
        except WorkflowAlreadyStartedError:
            # An earlier failover that is only watching its objective hands over to this one.
            if operation == "failover" and attempt == 0 and await supersede(client, workflow_id, initiator):
                continue
            # Same workflow id already running (visibility lagged behind): name it all the same.
            running = OperationInfo(
                workflow_id=workflow_id,
                operation=operation,
                fleet=cfg.name,
                ui_link=ui_link(cfg, workflow_id),
            )
            raise FleetBusyError(cfg.name, running) from None
    raise AssertionError("unreachable")  # the loop returns or raises


# How long a new failover waits for an earlier one to hand over: it ends its objective watch at once.
SUPERSEDE_WAIT_S = 30.0


async def supersede(client: Client, workflow_id: str, by: str) -> bool:
    """When the failover running as `workflow_id` is done for the fleet (verified, only watching its
    objective), ask it to end the watch and wait (bounded) for it to close. True when it closed (or
    was already gone), so the new one may start; False when it still owns the fleet."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        # The memo, not a query: Temporal answers it without a worker (a dead one would hang a query).
        desc = await handle.describe()
        if desc.status != WorkflowExecutionStatus.RUNNING:
            return True
        if not await desc.memo_value(MEMO_RELEASED, False):
            return False
        await handle.signal(SIGNAL_SUPERSEDE, SupersedeNotice(by=by, reason="a new failover was requested"))
        await asyncio.wait_for(handle.result(), SUPERSEDE_WAIT_S)
    except TimeoutError:
        return False
    except WorkflowFailureError:
        return True  # it ended failed: closed all the same
    except RPCError as exc:
        return exc.status == RPCStatusCode.NOT_FOUND
    return True
