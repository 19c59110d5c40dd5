"""Following an operation through the Temporal client: its result, whether it completed or failed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic

from temporalio.client import WorkflowFailureError, WorkflowHandle

from drctl.models.outcome import M, error_type, result_from
from drctl.models.phases import FLEET_BUSY


@dataclass
class Finished(Generic[M]):
    """A closed operation: its result, whether it failed, and whether the fleet was busy."""

    result: M
    failed: bool = False
    busy: bool = False


async def finished(handle: WorkflowHandle[Any, Any], model: type[M]) -> Finished[M]:
    """Wait for the operation and return its result whether it completed or failed.

    Raises the original error when the workflow failed without a result (a bug, a terminate).
    """
    try:
        raw = await handle.result()
    except WorkflowFailureError as exc:
        res = result_from(exc, model)
        if res is None:
            raise
        return Finished(res, failed=True, busy=error_type(exc) == FLEET_BUSY)
    return Finished(raw if isinstance(raw, model) else model.model_validate(raw))


async def result_of(handle: WorkflowHandle[Any, Any], model: type[M]) -> M:
    """The result model of a completed or failed operation (tests, bench)."""
    return (await finished(handle, model)).result
