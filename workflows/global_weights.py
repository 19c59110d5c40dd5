"""Global weight changes from a workflow: apply on the target region's queue, then wait for propagation.

Two activities, because Route 53 accepts a change at once (PENDING) and serves it everywhere up to
a minute later (INSYNC):
- `set_global_weights` returns the change id quickly. Its retries (Throttling,
  PriorRequestNotComplete) back off, and since it never waits for INSYNC it cannot time out
  because propagation is slow, so a slow propagation never re-sends the change.
- `wait_global_propagation` heartbeats and has its own deadline. Its end, INSYNC or not, is
  recorded in a GlobalChange and never raises: the weights are applied either way, so a slow
  propagation must not trip a compensation. Verification through the global endpoint is what
  proves the shift.
A synchronous tier (HAProxy) answers propagated at apply time, and no wait is scheduled.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from drctl.models.activity_io import SetWeightsInput
    from drctl.models.traffic import GlobalChange, PropagationInput, PropagationResult
    from workflows import calls
    from workflows.operation import cause_of

# Recorded as a marker in histories that wait; histories from before the wait existed replay without it.
PATCH_PROPAGATION_WAIT = "global-propagation-wait"

POLL_S = 2.0


async def apply(tq: str, weights: dict[str, int], reason: str, summary: str) -> GlobalChange:
    """Apply weights on queue `tq`; the GlobalChange says whether they are already in effect everywhere."""
    got = await calls.set_global_weights(
        SetWeightsInput(weights=weights, reason=reason), queue=tq, summary=summary
    )
    now = workflow.now()
    synchronous = got.change_id is None and got.propagated
    return GlobalChange(
        weights=got.weights,
        reason=reason,
        change_id=got.change_id,
        applied_at=now,
        propagated_at=now if got.propagated else None,
        propagation="synchronous" if synchronous else "insync" if got.propagated else "pending",
    )


def start_wait(tq: str, change: GlobalChange, timeout_s: float) -> asyncio.Task[Any] | None:
    """Start waiting for a PENDING change in the background; None when there is nothing to wait for."""
    if change.propagated_at is not None or change.change_id is None:
        return None
    if not workflow.patched(PATCH_PROPAGATION_WAIT):
        return None
    return asyncio.ensure_future(
        calls.wait_global_propagation(
            PropagationInput(change_id=change.change_id, timeout_s=timeout_s, poll_s=POLL_S),
            queue=tq,
            summary=f"wait for change {change.change_id} to be INSYNC",
        )
    )


async def finish_wait(task: asyncio.Task[Any] | None, change: GlobalChange) -> None:
    """Record how the wait ended in `change`. Never raises an activity failure (see the module doc)."""
    if task is None:
        return
    try:
        r: PropagationResult = await task
    except ActivityError as exc:
        change.propagation = "unknown"
        change.note = f"could not confirm propagation: {cause_of(exc)}"
        return
    if r.propagated:
        change.propagation, change.propagated_at = "insync", workflow.now()
    else:
        change.note = (
            f"still {r.status} after {r.waited_s:g} s ({r.polls} status checks); "
            "the weights are applied, check the change id with the provider"
        )


async def settle_wait(task: asyncio.Task[Any] | None, change: GlobalChange, why: str) -> None:
    """Record a wait that has ended, or abandon one still running (the change is being undone)."""
    if task is None:
        return
    if task.done():
        await finish_wait(task, change)
        return
    task.cancel()
    change.propagation = "unknown"
    change.note = f"stopped waiting for propagation: {why}"


async def apply_and_wait(
    tq: str, weights: dict[str, int], reason: str, summary: str, timeout_s: float
) -> GlobalChange:
    """Apply, then wait for propagation (bounded); for steps that must be in effect before the next one."""
    change = await apply(tq, weights, reason, summary)
    await finish_wait(start_wait(tq, change, timeout_s), change)
    return change
