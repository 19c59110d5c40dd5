"""How an operation's outcome travels: the error a workflow ends Failed with, and the metrics input.

A failover, failback, upgrade, migration, restore or drill that did not succeed raises a
non-retryable `ApplicationError` whose first detail is the operation's whole result model, so
the workflow list shows it red and every reader (CLI, monitor, drill, bench) still gets the result.
Workflows raise and read these errors, so they live here, below the client.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError, ChildWorkflowError

from drctl.models.phases import FLEET_BUSY

M = TypeVar("M", bound=BaseModel)

# ApplicationError.type of an operation that ran and did not succeed (FleetBusy: it never ran).
OPERATION_FAILED = "OperationFailed"


def failed(message: str, result: BaseModel, *, busy: bool = False) -> ApplicationError:
    """The error a workflow raises to end Failed while still handing back its result."""
    return ApplicationError(
        message, result, type=FLEET_BUSY if busy else OPERATION_FAILED, non_retryable=True
    )


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


class OutcomeInput(BaseModel):
    operation: Literal["failover", "failback"]
    fleet: str
    result: str = Field(description="The operation's final status, e.g. succeeded, failed, refused.")
    rto_s: float | None = Field(None, description="Measured RTO of a failover, seconds.")
    rto_target_s: float
