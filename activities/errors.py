"""The Temporal side of the one error table: a provider exception as an ApplicationError."""

from __future__ import annotations

from datetime import timedelta

from temporalio.exceptions import ApplicationError

from drctl.models.safe_text import safe_text
from drctl.providers.errors import classify

# A failure's message quotes what a server, a Kubernetes object or a file said; the Temporal UI shows
# it, history keeps it and workflows quote it in their own reasons: one escaped line, bounded.
FAILURE_CHARS = 4000


def app_error(exc: BaseException, action: str | None = None) -> ApplicationError:
    """Type and retryability come from drctl.providers.errors.classify, so every activity agrees."""
    err = classify(exc, action)
    # The server said when to come back (429 Retry-After): that overrides the policy's next interval.
    delay = timedelta(seconds=err.retry_after_s) if err.retryable and err.retry_after_s else None
    return ApplicationError(
        safe_text(err.message, limit=FAILURE_CHARS),
        type=err.kind,
        non_retryable=not err.retryable,
        next_retry_delay=delay,
    )


def refuse_all_zero(weights: dict[str, int], what: str) -> None:
    """Weights that are all 0 would leave traffic nowhere to go: refused, never retried."""
    if sum(weights.values()) <= 0:
        raise ApplicationError(
            f"refusing to set every {what} to 0 ({weights}): traffic would have nowhere to go",
            type="AllWeightsZero",
            non_retryable=True,
        )
