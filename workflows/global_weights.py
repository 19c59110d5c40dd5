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
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from drctl.models.ops import SetWeightsInput
    from drctl.models.traffic import GlobalChange, PropagationInput, PropagationResult, WeightsApplied
    from workflows.common import QUEUE_WAIT_S

# Recorded as a marker in histories that wait; histories from before the wait existed replay without it.
PATCH_PROPAGATION_WAIT = "global-propagation-wait"

# Throttling and PriorRequestNotComplete heal within seconds; back off rather than hammer the API
# (Route 53 allows 5 requests/s per account). Worst case ~22 s of backoff before giving up.
APPLY_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=500), backoff_coefficient=2.0,
                          maximum_interval=timedelta(seconds=5), maximum_attempts=8)
# The wait retries only when its worker died (heartbeat timeout); schedule_to_close bounds it all.
WAIT_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
# A region whose worker is gone must surface as an error, not a wait without end: the same queue
# wait as every other region-bound call.
SCHEDULE_TO_START = timedelta(seconds=QUEUE_WAIT_S)
POLL_S = 2.0


def _cause(exc: BaseException) -> str:
    while isinstance(exc, ActivityError) and exc.cause is not None:
        exc = exc.cause
    return str(exc)


async def apply(tq: str, weights: dict[str, int], reason: str, summary: str,
                forbid_traffic_to: list[str] | None = None) -> GlobalChange:
    """Apply weights on queue `tq`; the GlobalChange says whether they are already in effect everywhere."""
    got = await workflow.execute_activity(
        "set_global_weights",
        SetWeightsInput(weights=weights, reason=reason, forbid_traffic_to=forbid_traffic_to or []),
        result_type=WeightsApplied, summary=summary, task_queue=tq,
        start_to_close_timeout=timedelta(seconds=10), schedule_to_start_timeout=SCHEDULE_TO_START,
        retry_policy=APPLY_RETRY,
    )
    now = workflow.now()
    synchronous = got.change_id is None and got.propagated
    return GlobalChange(
        weights=got.weights, reason=reason, change_id=got.change_id, applied_at=now,
        propagated_at=now if got.propagated else None,
        propagation="synchronous" if synchronous else "insync" if got.propagated else "pending",
    )


def start_wait(tq: str, change: GlobalChange, timeout_s: float) -> asyncio.Task[Any] | None:
    """Start waiting for a PENDING change in the background; None when there is nothing to wait for."""
    if change.propagated_at is not None or change.change_id is None:
        return None
    if not workflow.patched(PATCH_PROPAGATION_WAIT):
        return None
    return asyncio.ensure_future(workflow.execute_activity(
        "wait_global_propagation", PropagationInput(change_id=change.change_id, timeout_s=timeout_s, poll_s=POLL_S),
        result_type=PropagationResult, summary=f"wait for change {change.change_id} to be INSYNC",
        task_queue=tq, schedule_to_start_timeout=SCHEDULE_TO_START,
        start_to_close_timeout=timedelta(seconds=timeout_s + 30),
        schedule_to_close_timeout=timedelta(seconds=timeout_s * 2 + 60),
        heartbeat_timeout=timedelta(seconds=10), retry_policy=WAIT_RETRY,
    ))


async def finish_wait(task: asyncio.Task[Any] | None, change: GlobalChange) -> None:
    """Record how the wait ended in `change`. Never raises an activity failure (see the module doc)."""
    if task is None:
        return
    try:
        r: PropagationResult = await task
    except ActivityError as exc:
        change.propagation = "unknown"
        change.note = f"could not confirm propagation: {_cause(exc)}"
        return
    if r.propagated:
        change.propagation, change.propagated_at = "insync", workflow.now()
    else:
        change.note = (f"still {r.status} after {r.waited_s:g} s ({r.polls} status checks); "
                       "the weights are applied, check the change id with the provider")


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


async def apply_and_wait(tq: str, weights: dict[str, int], reason: str, summary: str, timeout_s: float) -> GlobalChange:
    """Apply, then wait for propagation (bounded); for steps that must be in effect before the next one."""
    change = await apply(tq, weights, reason, summary)
    await finish_wait(start_wait(tq, change, timeout_s), change)
    return change
