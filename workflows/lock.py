"""FleetLock (`lock/<fleet>`): the one lock per fleet that every mutating operation takes.

Why a workflow: Temporal runs one workflow per id, and a workflow handles its updates one at a
time (here under an asyncio.Lock, because `acquire` awaits an activity). So two requests can never
both pass, and a request is refused only when a holder that was granted before it is still running.

- Operations ask through the `acquire_fleet` activity, which sends the `acquire` update with
  update-with-start: the first request starts the lock, later ones reach the running one.
- Holders release with a `release` signal in their `finally` (a workflow can signal, not update).
- A holder that crashed or was terminated never releases. Before refusing anyone, the lock checks
  that each blocking holder's run is still open (`lock_holders_closed` activity) and evicts the
  closed ones, so a dead holder blocks nobody. Liveness is checked on contention, not by lease, so
  an idle fleet costs no history.
- DR first: a failover preempts maintenance (upgrade, migrate, restore). The lock grants the
  failover at once and signals `preempt` to the maintenance holder, which rolls back or stops its
  traffic steps and records why. Until it releases it still blocks other maintenance.
- The lock ends when nobody holds the fleet; the next request starts a new run.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, FailureError

with workflow.unsafe.imports_passed_through():
    from drctl.models.lock import (
        QUERY_HOLDERS,
        SIGNAL_PREEMPT,
        SIGNAL_RELEASE,
        UPDATE_ACQUIRE,
        AliveInput,
        Holder,
        LockGrant,
        LockInput,
        LockRelease,
        LockRequest,
        LockState,
        PreemptNotice,
        blocks,
        compatible,
        lock_id,
        preempts,
    )
    from drctl.models.phases import FLEET_BUSY
    from drctl.models.safe_text import safe_markdown
    from workflows import calls


def _same(h: Holder, workflow_id: str, run_id: str) -> bool:
    return h.workflow_id == workflow_id and h.run_id == run_id


@workflow.defn(name="FleetLock")
class FleetLock:
    @workflow.init
    def __init__(self, inp: LockInput) -> None:
        self.fleet = inp.fleet
        self.holders: list[Holder] = list(inp.holders)
        self.mutex = asyncio.Lock()

    @workflow.query(name=QUERY_HOLDERS)
    def state(self) -> LockState:
        return LockState(fleet=self.fleet, holders=list(self.holders))

    @workflow.signal(name=SIGNAL_RELEASE)
    def release(self, rel: LockRelease) -> None:
        self.holders = [h for h in self.holders if not _same(h, rel.workflow_id, rel.run_id)]
        self._render()

    @workflow.update(name=UPDATE_ACQUIRE)
    async def acquire(self, req: LockRequest) -> LockGrant:
        async with self.mutex:
            grant = await self._judge(req.holder)
        self._render()
        return grant

    @acquire.validator
    def _validate_acquire(self, req: LockRequest) -> None:
        if req.fleet != self.fleet:
            raise ValueError(f"this is the lock of fleet {self.fleet!r}, not {req.fleet!r}")

    @workflow.run
    async def run(self, inp: LockInput) -> LockState:
        self._render()
        while True:
            await workflow.wait_condition(
                lambda: (
                    (not self.holders or workflow.info().is_continue_as_new_suggested())
                    and workflow.all_handlers_finished()
                )
            )
            if not self.holders:
                return self.state()
            workflow.continue_as_new(LockInput(fleet=self.fleet, holders=self.holders))

    async def _judge(self, me: Holder) -> LockGrant:
        grant = LockGrant(granted=False)
        if any(_same(h, me.workflow_id, me.run_id) for h in self.holders):
            grant.granted = True  # a retried acquire of a holder we already granted
            return grant
        # Workflow ids are unique among running workflows, so an older run of the same id is over.
        grant.evicted = [h for h in self.holders if h.workflow_id == me.workflow_id]
        self.holders = [h for h in self.holders if h.workflow_id != me.workflow_id]
        blockers = [h for h in self.holders if blocks(h.operation, me.operation)]
        if blockers:
            closed = await self._closed(blockers)
            grant.evicted += closed
            self.holders = [
                h for h in self.holders if not any(_same(h, c.workflow_id, c.run_id) for c in closed)
            ]
            blockers = [h for h in self.holders if blocks(h.operation, me.operation)]
        if blockers:
            grant.blocked_by = blockers[0]
            return grant
        for h in list(self.holders):
            if h.yielding_to is None and preempts(me.operation, h.operation):
                await self._preempt(h, me, grant)
        grant.beside = [h for h in self.holders if compatible(h.operation, me.operation)]
        self.holders.append(me.model_copy(update={"since": workflow.now()}))
        grant.granted = True
        return grant

    async def _preempt(self, h: Holder, me: Holder, grant: LockGrant) -> None:
        notice = PreemptNotice(
            by_workflow_id=me.workflow_id,
            by_operation=me.operation,
            reason=f"{me.operation} {me.workflow_id} takes the fleet (DR comes first)",
        )
        try:
            await workflow.get_external_workflow_handle(h.workflow_id, run_id=h.run_id).signal(
                SIGNAL_PREEMPT, notice
            )
        except FailureError:
            # The holder's run is gone: nothing left to yield, just forget it.
            self.holders = [x for x in self.holders if x is not h]
            grant.evicted.append(h)
            return
        h.yielding_to = me.workflow_id
        grant.preempted.append(h)

    async def _closed(self, holders: list[Holder]) -> list[Holder]:
        try:
            res = await calls.lock_holders_closed(
                AliveInput(holders=holders), summary="are the holders still running?"
            )
        except ActivityError as exc:
            # Unknown is treated as alive: refusing is safe, granting a second holder is not.
            workflow.logger.warning("holder liveness unknown, treating them as alive: %s", exc.cause or exc)
            return []
        return res.closed

    def _render(self) -> None:
        lines = [
            f"## Lock of fleet `{self.fleet}`",
            "| holder | operation | since | yielding to |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {safe_markdown(h.workflow_id)} | {safe_markdown(h.operation)} "
            f"| {h.since.isoformat() if h.since else ''} | {safe_markdown(h.yielding_to or '')} |"
            for h in self.holders
        ]
        workflow.set_current_details("\n".join(lines))


# --- what holders call ---------------------------------------------------------------------------


async def acquire_fleet(fleet: str, operation: str) -> LockGrant:
    """Take the fleet's lock for this workflow run; raises FleetBusy naming the holder when refused."""
    info = workflow.info()
    me = Holder(workflow_id=info.workflow_id, run_id=info.run_id, operation=operation)
    grant = await calls.acquire_fleet(LockRequest(fleet=fleet, holder=me), summary=f"lock fleet {fleet}")
    if not grant.granted:
        b = grant.blocked_by
        who = f"{b.operation} {b.workflow_id}" if b else "another operation"
        raise ApplicationError(
            f"fleet {fleet!r} is busy: {who} is running"
            + (f" (since {b.since.isoformat(timespec='seconds')})" if b and b.since else "")
            + (f"; {grant.blocked_by_ui}" if grant.blocked_by_ui else "")
            + "; wait for it to finish or abort it with `drctl ops abort`",
            b.model_dump(mode="json") if b else None,
            type=FLEET_BUSY,
            non_retryable=True,
        )
    return grant


async def release_fleet(fleet: str) -> None:
    """Give the lock back (in a finally): a signal, so it needs no worker and cannot time out."""
    info = workflow.info()
    try:
        await workflow.get_external_workflow_handle(lock_id(fleet)).signal(
            SIGNAL_RELEASE, LockRelease(workflow_id=info.workflow_id, run_id=info.run_id)
        )
    except FailureError as exc:
        # The lock is gone (terminated by hand): there is nothing to release.
        workflow.logger.warning("lock %s not released: %s", lock_id(fleet), exc)


WORKFLOWS = [FleetLock]
