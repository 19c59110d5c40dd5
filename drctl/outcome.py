"""Operation outcomes as Temporal shows them: an operation that did not succeed ends Failed.

A failover, failback, upgrade, migration, restore or drill that did not succeed raises a
non-retryable `ApplicationError` whose first detail is the operation's whole result model, so
the workflow list shows it red and every reader (CLI, monitor, drill, bench) still gets the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

from drctl.models.ops import FLEET_BUSY

M = TypeVar("M", bound=BaseModel)

# ApplicationError.type of an operation that ran and did not succeed (FleetBusy: it never ran).
OPERATION_FAILED = "OperationFailed"


def failed(message: str, result: BaseModel, *, busy: bool = False) -> ApplicationError:
    """The error a workflow raises to end Failed while still handing back its result."""
    return ApplicationError(message, result, type=FLEET_BUSY if busy else OPERATION_FAILED, non_retryable=True)


def _app_error(exc: BaseException | None) -> ApplicationError | None:
    while exc is not None:
        if isinstance(exc, ApplicationError):
            return exc
        if isinstance(exc, (WorkflowFailureError, ChildWorkflowError, ActivityError)):
            exc = exc.cause
        else:
            return None
    return None


def error_type(exc: BaseException) -> str | None:
    app = _app_error(exc)
    return app.type if app else None


def details_from(exc: BaseException) -> Any | None:
    """The first detail of the ApplicationError behind `exc` (a failed operation's result), if any."""
    app = _app_error(exc)
    return app.details[0] if app is not None and app.details else None


def result_from(exc: BaseException, model: type[M]) -> M | None:
    """The result model carried by a failed operation's error, or None when it carries none."""
    first = details_from(exc)
    if isinstance(first, model):
        return first
    if isinstance(first, dict):
        try:
            return model.model_validate(first)
        except ValueError:
            return None
    return None


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
