"""Reporting an operation's outcome to the metrics, from workflow code, without ever failing it."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from drctl.models.outcome import OutcomeInput

# Histories recorded before this activity existed replay without it.
PATCH = "record-outcome-metrics"


async def record_outcome(operation: str, fleet: str, result: str, rto_s: float | None, rto_target_s: float) -> None:
    """Count the outcome through the `record_outcome` activity; a failure there is logged, never raised."""
    if not workflow.patched(PATCH):
        return
    inp = OutcomeInput.model_validate(
        {"operation": operation, "fleet": fleet, "result": result, "rto_s": rto_s, "rto_target_s": rto_target_s})
    try:
        await workflow.execute_activity(
            "record_outcome", inp, summary=f"metrics: {operation} {result}",
            start_to_close_timeout=timedelta(seconds=10),
            # Metrics must not hold up or fail the operation: a few quick tries, then a warning.
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=3),
        )
    except ActivityError as exc:
        workflow.logger.warning("could not record the %s outcome in the metrics: %s", operation, exc.cause or exc)
