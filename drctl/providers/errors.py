"""The one error table: provider exceptions → ErrorClass(kind, retryable, message).

Activities turn the result into `ApplicationError(message, type=kind, non_retryable=not retryable)`,
so Temporal retries what can heal by itself (conflicts, throttling, 5xx, lost connections) and stops
at once on what cannot (missing RBAC, bad credentials, a missing object, an invalid request).
kopf's `_cogs/clients/errors.py` status table is the model. Providers stay free of Temporal.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import urllib3.exceptions
from botocore.exceptions import BotoCoreError, ClientError, ConnectTimeoutError, EndpointConnectionError
from botocore.exceptions import ReadTimeoutError as BotoReadTimeoutError
from kubernetes.client.exceptions import ApiException
from pydantic import BaseModel, Field

from drctl.providers.base import DeploymentState
from drctl.providers.haproxy_runtime import HAProxyBadReply, HAProxyError


class ErrorClass(BaseModel):
    kind: str = Field(description="ApplicationError type: Forbidden, NotFound, Conflict, ...")
    retryable: bool
    message: str
    retry_after_s: float | None = Field(
        None, description="The server's Retry-After: wait at least this long before the next attempt."
    )


class ProviderError(Exception):
    """A provider failure already classified, with the action that failed named in the message."""

    def __init__(self, error: ErrorClass) -> None:
        super().__init__(error.message)
        self.error = error


class RolloutTimeout(ProviderError):
    """A Deployment did not finish rolling out before its deadline. Carries the last state seen."""

    def __init__(self, state: DeploymentState, timeout_s: float, missing: str) -> None:
        self.state = state
        self.timeout_s = timeout_s
        self.missing = missing
        super().__init__(
            ErrorClass(
                kind="RolloutTimeout",
                # The workflow decides what a stuck rollout means (roll back, compensate); retrying
                # the same wait inside the activity would only hide the deadline it asked for.
                retryable=False,
                message=f"deployment {state.namespace}/{state.name} not rolled out after {timeout_s:g}s: {missing}",
            )
        )


# HTTP status → (kind, retryable). Shared by the Kubernetes API, AWS and plain HTTP.
_STATUS: dict[int, tuple[str, bool]] = {
    400: ("Invalid", False),
    401: ("Unauthorized", False),
    403: ("Forbidden", False),
    404: ("NotFound", False),
    409: ("Conflict", True),  # resourceVersion races heal on a fresh read-modify-write
    410: ("Gone", True),  # expired watch/list continue token: start over
    422: ("Invalid", False),
    429: ("RateLimited", True),
}

# botocore error codes that the status alone gets wrong or does not carry.
_AWS_CODES: dict[str, tuple[str, bool]] = {
    "AccessDenied": ("Forbidden", False),
    "AccessDeniedException": ("Forbidden", False),
    "UnauthorizedOperation": ("Forbidden", False),
    "InvalidClientTokenId": ("Unauthorized", False),
    "ExpiredToken": ("Unauthorized", False),
    "ExpiredTokenException": ("Unauthorized", False),
    "SignatureDoesNotMatch": ("Unauthorized", False),
    # S3's own codes for a temporary key sent without its session token, or with another one.
    "InvalidAccessKeyId": ("Unauthorized", False),
    "InvalidToken": ("Unauthorized", False),
    "NoSuchBucket": ("NotFound", False),
    "NoSuchKey": ("NotFound", False),
    "NoSuchHostedZone": ("NotFound", False),
    "NoSuchHealthCheck": ("NotFound", False),
    "Throttling": ("RateLimited", True),
    "ThrottlingException": ("RateLimited", True),
    "RequestLimitExceeded": ("RateLimited", True),
    "SlowDown": ("RateLimited", True),
    "TooManyRequestsException": ("RateLimited", True),
    # Route 53 refuses a change batch while the previous one to the zone is still PENDING.
    "PriorRequestNotComplete": ("Conflict", True),
    "InvalidChangeBatch": ("Invalid", False),
    "InvalidInput": ("Invalid", False),
    "ValidationError": ("Invalid", False),
    "InternalError": ("ServerError", True),
    "ServiceUnavailable": ("ServerError", True),
}


def aws_code_class(code: str) -> tuple[str, bool] | None:
    """(kind, retryable) of an AWS error code, for clients that only see it in text (rclone)."""
    return _AWS_CODES.get(code)


def _by_status(status: int | None) -> tuple[str, bool]:
    if status is None or status == 0:
        return ("Unavailable", True)
    if status in _STATUS:
        return _STATUS[status]
    if status >= 500:
        return ("ServerError", True)
    return ("Invalid", False)


def _kube_message(exc: ApiException) -> str:
    """The API server's own words: the Status object's message, else the HTTP reason."""
    try:
        body: Any = json.loads(exc.body) if exc.body else None
    except (TypeError, ValueError):
        body = None
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])
    return str(exc.reason or "no message")


def _retry_after(headers: Any) -> float | None:
    """Retry-After in seconds (API priority and fairness sends it with 429); dates are not used by
    the API server, so only the delta-seconds form is read."""
    value = headers.get("Retry-After") if headers is not None else None
    try:
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError):
        return None
    # Bounded: a hostile or broken header must not park an activity for hours.
    return min(seconds, 300.0) if seconds is not None and seconds > 0 else None


def _hint(kind: str) -> str:
    if kind == "Forbidden":
        return " (grant drctl's identity this permission: RBAC Role/ClusterRole or IAM policy)"
    if kind == "Unauthorized":
        return " (credentials missing or expired: check the kubeconfig/token or AWS credentials)"
    return ""


def classify(exc: BaseException, action: str | None = None) -> ErrorClass:
    """Map any provider exception to its ErrorClass.

    Args:
        exc: the exception raised by a provider or client library.
        action: what was being attempted, e.g. "patch deployments/scale inference/llm-stable";
            it leads the message so an operator sees which verb on which resource failed.
    """
    what = f"{action}: " if action else ""
    if isinstance(exc, ProviderError):
        return exc.error
    if isinstance(exc, ApiException):
        kind, retryable = _by_status(exc.status)
        msg = f"{kind}: {what}HTTP {exc.status} {_kube_message(exc)}{_hint(kind)}"
        return ErrorClass(
            kind=kind, retryable=retryable, message=msg, retry_after_s=_retry_after(exc.headers)
        )
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        kind, retryable = _AWS_CODES.get(code) or _by_status(status)
        op = getattr(exc, "operation_name", None) or "AWS call"
        msg = f"{kind}: {what}{op} failed with {code or status}: {err.get('Message', '')}{_hint(kind)}"
        return ErrorClass(kind=kind, retryable=retryable, message=msg.rstrip(": "))
    if isinstance(exc, (EndpointConnectionError, ConnectTimeoutError, BotoReadTimeoutError)):
        return ErrorClass(kind="Unavailable", retryable=True, message=f"Unavailable: {what}{exc}")
    if isinstance(exc, BotoCoreError):
        # Missing credentials, bad parameters: nothing a retry fixes.
        return ErrorClass(kind="Invalid", retryable=False, message=f"Invalid: {what}{exc}")
    if isinstance(exc, httpx.HTTPStatusError):
        kind, retryable = _by_status(exc.response.status_code)
        msg = f"{kind}: {what}HTTP {exc.response.status_code} from {exc.request.url}{_hint(kind)}"
        return ErrorClass(kind=kind, retryable=retryable, message=msg)
    if isinstance(exc, httpx.TimeoutException):
        return ErrorClass(kind="Timeout", retryable=True, message=f"Timeout: {what}{_describe(exc)}")
    if isinstance(exc, httpx.TransportError):
        return ErrorClass(kind="Unavailable", retryable=True, message=f"Unavailable: {what}{_describe(exc)}")
    if isinstance(exc, urllib3.exceptions.HTTPError):
        # The kubernetes client surfaces refused connections and read timeouts as urllib3 errors.
        return ErrorClass(kind="Unavailable", retryable=True, message=f"Unavailable: {what}{exc}")
    if isinstance(exc, HAProxyBadReply):
        # A reply cut short by a reload heals; a socket that is not HAProxy's fails every attempt,
        # and the call site's retry policy bounds those with this message naming the socket.
        return ErrorClass(kind="HAProxyBadReply", retryable=True, message=f"HAProxyBadReply: {what}{exc}")
    if isinstance(exc, HAProxyError):
        # An unreachable socket (HAProxy restarting) heals; a rejected command will be rejected again.
        reachable = not isinstance(exc.__cause__, OSError)
        kind = "HAProxyRejected" if reachable else "Unavailable"
        return ErrorClass(kind=kind, retryable=not reachable, message=f"{kind}: {what}{exc}")
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return ErrorClass(kind="Unavailable", retryable=True, message=f"Unavailable: {what}{exc}")
    if isinstance(exc, ValueError) and not isinstance(exc, (UnicodeError, json.JSONDecodeError)):
        # Validation (a weight out of range, an unknown region): the same input fails the same way.
        # Decode errors are left retryable: they come from a garbled answer, not from our input.
        return ErrorClass(kind="Invalid", retryable=False, message=f"Invalid: {what}{exc}")
    # Unknown failures keep Temporal's default (retry); the call site's retry policy bounds them.
    return ErrorClass(kind=type(exc).__name__, retryable=True, message=f"{what}{exc}")


def _describe(exc: httpx.HTTPError) -> str:
    try:
        url = f" ({exc.request.method} {exc.request.url})"
    except RuntimeError:  # an httpx error raised without a request attached
        url = ""
    return f"{type(exc).__name__}{url}: {exc}".rstrip(": ")
