"""`ApprovalReminder`: an approval gate tells the webhooks it waits, and again before it times out.

Behind `workflow.patched(PATCH)`, and only when a webhook wants `approval.pending`: a gate with no
such webhook, or recorded before this existed, emits the same commands as before (one timer-less
wait), so its history replays unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from workflows.notify import Notifier

PATCH = "approval-notify"
EVENT = "approval.pending"


def reminder_before_s(timeout_s: float, configured: float | None) -> float:
    """How long before the timeout the reminder goes: as configured, else at 80 % of the wait."""
    before = configured if configured is not None else timeout_s / 5
    return min(before, timeout_s)


class ApprovalReminder:
    """Held by an operation with an approval gate; `Operation.await_approval` drives it."""

    def __init__(self, notes: Notifier, what: str, reminder_before_s: float | None) -> None:
        self.notes = notes
        self.what = what  # e.g. "failover to us-east-1"
        self.reminder_before_s = reminder_before_s

    def on(self) -> bool:
        return self.notes.wants(EVENT) and workflow.patched(PATCH)

    async def wait(self, answered: Callable[[], bool], timeout_s: float, initiator: str | None) -> None:
        """Notify, wait until `answered()`; remind ahead of the timeout; TimeoutError at the timeout."""
        before = reminder_before_s(timeout_s, self.reminder_before_s)
        try:
            self.notes.approval_pending(self.what, initiator, left_s=timeout_s, reminder=False)
            try:
                await workflow.wait_condition(answered, timeout=timedelta(seconds=timeout_s - before))
                return
            except TimeoutError:
                pass
            self.notes.approval_pending(self.what, initiator, left_s=before, reminder=True)
            await workflow.wait_condition(answered, timeout=timedelta(seconds=before))
        finally:
            await self.notes.flush()  # started, not delivered: the operation goes on at once
