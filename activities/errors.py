"""The Temporal side of the one error table: a provider exception as an ApplicationError."""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from drctl.providers.errors import classify


def app_error(exc: BaseException, action: str | None = None) -> ApplicationError:
    """Type and retryability come from drctl.providers.errors.classify, so every activity agrees."""
    err = classify(exc, action)
    return ApplicationError(err.message, type=err.kind, non_retryable=not err.retryable)
