"""Shared workflow helpers: phase bookkeeping for the Temporal UI, and activity option presets."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType

with workflow.unsafe.imports_passed_through():
    from drctl import search_attributes as sa
    from drctl.models.ops import OperationProgress, PhaseTiming

# Fast, idempotent calls (read or set weights, probe): retry quickly, a handful of times, because
# a failover is racing its RTO and a transient socket error must not end it.
FAST_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=2.0,
                         maximum_interval=timedelta(seconds=2), maximum_attempts=5)
# Platform calls (Kubernetes API): conflicts and throttling heal within seconds.
PLATFORM_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                             maximum_interval=timedelta(seconds=10), maximum_attempts=6)
# Verification is repeated by the workflow itself until its deadline, so no activity retry.
NO_RETRY = RetryPolicy(maximum_attempts=1)


# How long any activity may wait in its task queue for a worker. A region's worker that is dead (or
# a queue nobody serves) must surface as an error naming the queue, never as an operation that waits
# forever: Temporal retries nothing on a schedule-to-start timeout, so this is the whole wait. Far
# above a live worker's pickup latency (milliseconds), and short enough that a failover to a region
# without a worker fails, and the monitor tries another region, well inside 90 s.
QUEUE_WAIT_S = 30.0


def fast(seconds: float = 10.0) -> dict[str, Any]:
    return {"start_to_close_timeout": timedelta(seconds=seconds), "retry_policy": FAST_RETRY,
            "schedule_to_start_timeout": timedelta(seconds=QUEUE_WAIT_S)}


def region_bound(queue: str, seconds: float = 30.0) -> dict[str, Any]:
    return {
        "task_queue": queue,
        "start_to_close_timeout": timedelta(seconds=seconds),
        "schedule_to_start_timeout": timedelta(seconds=QUEUE_WAIT_S),
        "retry_policy": PLATFORM_RETRY,
    }


def no_worker(exc: BaseException, queue: str) -> str | None:
    """The message for an activity no worker picked up from `queue`, else None.

    Callers pass the region queue: main-queue activities are served by the same workers that run
    the workflow itself, so while a workflow runs only a region queue can go unserved.
    """
    cause = exc.cause if isinstance(exc, ActivityError) else None
    if isinstance(cause, TimeoutError) and cause.type is TimeoutType.SCHEDULE_TO_START:
        name = exc.activity_type if isinstance(exc, ActivityError) else "activity"
        return (f"no worker picked up {name} from task queue {queue!r} within {QUEUE_WAIT_S:g} s: "
                "is the worker serving that queue running (`drctl worker --region R`)?")
    return None


class Phases:
    """Phase bookkeeping: DrctlPhase search attribute, current-details markdown, logs, timings."""

    def __init__(self, operation: str, title: str) -> None:
        self.operation = operation
        self.title = title
        self.phase = "pending"
        self.details = ""
        self.timings: list[PhaseTiming] = []
        self.facts: dict[str, str] = {}
        self.awaiting_approval = False

    def enter(self, phase: str, details: str = "") -> None:
        now = workflow.now()
        self._close(now)
        self.timings.append(PhaseTiming(phase=phase, started_at=now))
        self.phase = phase
        self.details = details
        workflow.upsert_search_attributes([sa.PHASE.value_set(phase)])
        workflow.logger.info("%s: phase %s %s", self.operation, phase, details)
        self._render()

    def note(self, key: str, value: str) -> None:
        self.facts[key] = value
        self._render()

    def finish(self, phase: str, details: str = "") -> None:
        now = workflow.now()
        self._close(now)
        self.phase = phase
        self.details = details
        workflow.upsert_search_attributes([sa.PHASE.value_set(phase)])
        workflow.logger.info("%s: %s %s", self.operation, phase, details)
        self._render()

    def _close(self, now: Any) -> None:
        if self.timings and self.timings[-1].ended_at is None:
            last = self.timings[-1]
            last.ended_at = now
            last.duration_s = round((now - last.started_at).total_seconds(), 3)

    def _render(self) -> None:
        lines = [f"## {self.title}", f"**Phase:** `{self.phase}`"]
        if self.details:
            lines.append(f"\n{self.details}")
        if self.facts:
            lines.append("\n| | |\n|---|---|")
            lines += [f"| {k} | {v} |" for k, v in self.facts.items()]
        if self.timings:
            lines.append("\n| phase | seconds |\n|---|---|")
            lines += [f"| {t.phase} | {t.duration_s if t.duration_s is not None else '…'} |" for t in self.timings]
        workflow.set_current_details("\n".join(lines))

    def progress(self) -> OperationProgress:
        return OperationProgress(
            operation=self.operation,
            phase=self.phase,
            details=self.details,
            awaiting_approval=self.awaiting_approval,
            phases=list(self.timings),
        )


def fmt_weights(w: dict[str, int]) -> str:
    return " / ".join(f"{k} {v}" for k, v in w.items())
