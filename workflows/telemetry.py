"""Reporting an operation's outcome to the metrics, from workflow code, without ever failing it."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from drctl.models.outcome import OutcomeInput
    from workflows import calls

# Histories recorded before this activity existed replay without it.
PATCH = "record-outcome-metrics"


async def record_outcome(
    operation: str, fleet: str, result: str, rto_s: float | None, rto_target_s: float
) -> None:
    """Count the outcome through the `record_outcome` activity; a failure there is logged, never raised."""
    if not workflow.patched(PATCH):
        return
    inp = OutcomeInput.model_validate(
        {
            "operation": operation,
            "fleet": fleet,
            "result": result,
            "rto_s": rto_s,
            "rto_target_s": rto_target_s,
        }
    )
    try:
        await calls.record_outcome(inp, summary=f"metrics: {operation} {result}")
    except ActivityError as exc:
        workflow.logger.warning(
            "could not record the %s outcome in the metrics: %s", operation, exc.cause or exc
        )
