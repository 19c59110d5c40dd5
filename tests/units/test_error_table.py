"""classify(): the one error table, branch by branch, with the exact message an operator reads.

tests/providers/test_errors.py drives real servers; these pin each row alone (kind, retryable,
message, Retry-After) so a changed row cannot pass unnoticed."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import urllib3.exceptions
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)
from kubernetes.client.exceptions import ApiException

from drctl.providers.base import DeploymentState
from drctl.providers.errors import (
    ErrorClass,
    ProviderError,
    RolloutTimeout,
    _by_status,
    _describe,
    _retry_after,
    classify,
)
from drctl.providers.haproxy_runtime import HAProxyBadReply, HAProxyError

ACTION = "patch deployments/scale inference/llm-stable"
FORBIDDEN_HINT = " (grant drctl's identity this permission: RBAC Role/ClusterRole or IAM policy)"
UNAUTHORIZED_HINT = " (credentials missing or expired: check the kubeconfig/token or AWS credentials)"


def _c(exc: BaseException, action: str | None = ACTION) -> tuple[str, bool, str, float | None]:
    e = classify(exc, action)
    return e.kind, e.retryable, e.message, e.retry_after_s


def _kube(
    status: int | None, body: Any = None, reason: str | None = "Reason", headers: Any = None
) -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = json.dumps(body) if isinstance(body, dict) else body
    exc.headers = headers
    return exc


@pytest.mark.parametrize(
    ("status", "kind", "retryable"),
    [
        (None, "Unavailable", True),
        (0, "Unavailable", True),
        (400, "Invalid", False),
        (401, "Unauthorized", False),
        (403, "Forbidden", False),
        (404, "NotFound", False),
        (409, "Conflict", True),
        (410, "Gone", True),
        (422, "Invalid", False),
        (429, "RateLimited", True),
        (500, "ServerError", True),
        (503, "ServerError", True),
        (499, "Invalid", False),
        (418, "Invalid", False),
    ],
)
def test_status_table(status: int | None, kind: str, retryable: bool) -> None:
    assert _by_status(status) == (kind, retryable)


def test_kubernetes_errors_quote_the_api_servers_message_and_hint_at_the_fix() -> None:
    exc = _kube(403, {"message": 'deployments.apps "llm-stable" is forbidden'}, headers={})
    assert _c(exc) == (
        "Forbidden",
        False,
        f'Forbidden: {ACTION}: HTTP 403 deployments.apps "llm-stable" is forbidden{FORBIDDEN_HINT}',
        None,
    )
    assert _c(_kube(401, "not json", reason="Unauthorized"), None) == (
        "Unauthorized",
        False,
        f"Unauthorized: HTTP 401 Unauthorized{UNAUTHORIZED_HINT}",
        None,
    )
    assert _c(_kube(404, {"kind": "Status"}, reason=None)) == (
        "NotFound",
        False,
        f"NotFound: {ACTION}: HTTP 404 no message",
        None,
    )
    assert _c(_kube(409, None, reason="Conflict")) == (
        "Conflict",
        True,
        f"Conflict: {ACTION}: HTTP 409 Conflict",
        None,
    )
    assert _c(_kube(429, b"\xff", headers={"Retry-After": "7"})) == (
        "RateLimited",
        True,
        f"RateLimited: {ACTION}: HTTP 429 Reason",
        7.0,
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("7", 7.0),
        ("0.5", 0.5),
        ("3600", 300.0),
        ("300", 300.0),
        ("0", None),
        ("-3", None),
        ("soon", None),
        (None, None),
        ("Wed, 21 Oct 2026 07:28:00 GMT", None),
    ],
)
def test_retry_after_reads_seconds_and_is_bounded(value: str | None, expected: float | None) -> None:
    assert _retry_after({"Retry-After": value} if value is not None else {}) == expected


def test_retry_after_without_headers() -> None:
    assert _retry_after(None) is None
    assert _retry_after({"retry-after": "5"}) is None  # the kubernetes client keeps the server's case


def _aws(
    code: str, status: int | None = 400, message: str = "msg", op: str = "ChangeResourceRecordSets"
) -> ClientError:
    meta = {"HTTPStatusCode": status} if status is not None else {}
    return ClientError({"Error": {"Code": code, "Message": message}, "ResponseMetadata": meta}, op)


@pytest.mark.parametrize(
    ("code", "kind", "retryable"),
    [
        ("AccessDenied", "Forbidden", False),
        ("AccessDeniedException", "Forbidden", False),
        ("UnauthorizedOperation", "Forbidden", False),
        ("InvalidClientTokenId", "Unauthorized", False),
        ("ExpiredToken", "Unauthorized", False),
        ("ExpiredTokenException", "Unauthorized", False),
        ("SignatureDoesNotMatch", "Unauthorized", False),
        ("NoSuchBucket", "NotFound", False),
        ("NoSuchKey", "NotFound", False),
        ("NoSuchHostedZone", "NotFound", False),
        ("NoSuchHealthCheck", "NotFound", False),
        ("Throttling", "RateLimited", True),
        ("ThrottlingException", "RateLimited", True),
        ("RequestLimitExceeded", "RateLimited", True),
        ("SlowDown", "RateLimited", True),
        ("TooManyRequestsException", "RateLimited", True),
        ("PriorRequestNotComplete", "Conflict", True),
        ("InvalidChangeBatch", "Invalid", False),
        ("InvalidInput", "Invalid", False),
        ("ValidationError", "Invalid", False),
        ("InternalError", "ServerError", True),
        ("ServiceUnavailable", "ServerError", True),
    ],
)
def test_aws_codes_decide_before_the_status(code: str, kind: str, retryable: bool) -> None:
    # Status 200 would otherwise read as Invalid: only the code can say what happened.
    got = classify(_aws(code, 200))
    assert (got.kind, got.retryable) == (kind, retryable)


def test_aws_messages_name_the_operation_and_the_code() -> None:
    assert _c(_aws("AccessDenied", 403, "not allowed")) == (
        "Forbidden",
        False,
        f"Forbidden: {ACTION}: ChangeResourceRecordSets failed with AccessDenied: not allowed"
        f"{FORBIDDEN_HINT}",
        None,
    )
    assert _c(_aws("ExpiredToken", 400), None)[2] == (
        f"Unauthorized: ChangeResourceRecordSets failed with ExpiredToken: msg{UNAUTHORIZED_HINT}"
    )
    # An unknown code falls back to the HTTP status, and an empty message leaves no dangling colon.
    assert _c(_aws("Weird", 503, "")) == (
        "ServerError",
        True,
        f"ServerError: {ACTION}: ChangeResourceRecordSets failed with Weird",
        None,
    )
    assert _c(_aws("", 404, "")) == (
        "NotFound",
        False,
        f"NotFound: {ACTION}: ChangeResourceRecordSets failed with 404",
        None,
    )
    assert _c(_aws("", None, "gone"), None) == (
        "Unavailable",
        True,
        "Unavailable: ChangeResourceRecordSets failed with None: gone",
        None,
    )
    no_op = ClientError({"Error": {"Code": "SlowDown", "Message": "m"}}, "")
    assert classify(no_op).message == "RateLimited: AWS call failed with SlowDown: m"
    no_code = ClientError(
        {"Error": {"Message": "gone"}, "ResponseMetadata": {"HTTPStatusCode": 404}}, "GetObject"
    )
    assert classify(no_code).message == "NotFound: GetObject failed with 404: gone"
    assert classify(_aws("SlowDown", 503, "retry in X")).message == (
        "RateLimited: ChangeResourceRecordSets failed with SlowDown: retry in X"
    )
    empty = ClientError({}, "GetObject")
    assert (classify(empty).kind, classify(empty).message) == (
        "Unavailable",
        "Unavailable: GetObject failed with None",
    )


def test_aws_transport_and_client_errors() -> None:
    url = "http://127.0.0.1:1"
    for exc in (
        EndpointConnectionError(endpoint_url=url),
        ConnectTimeoutError(endpoint_url=url),
        ReadTimeoutError(endpoint_url=url),
    ):
        assert _c(exc) == ("Unavailable", True, f"Unavailable: {ACTION}: {exc}", None)
    assert _c(NoCredentialsError(), None) == ("Invalid", False, "Invalid: Unable to locate credentials", None)


def test_http_errors_name_the_url_and_method() -> None:
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/completions")
    status = httpx.HTTPStatusError("x", request=request, response=httpx.Response(403, request=request))
    assert _c(status) == (
        "Forbidden",
        False,
        f"Forbidden: {ACTION}: HTTP 403 from http://127.0.0.1:9/v1/completions{FORBIDDEN_HINT}",
        None,
    )
    busy = httpx.HTTPStatusError("x", request=request, response=httpx.Response(502, request=request))
    assert _c(busy, None) == (
        "ServerError",
        True,
        "ServerError: HTTP 502 from http://127.0.0.1:9/v1/completions",
        None,
    )
    assert _c(httpx.ReadTimeout("timed out", request=request)) == (
        "Timeout",
        True,
        f"Timeout: {ACTION}: ReadTimeout (POST http://127.0.0.1:9/v1/completions): timed out",
        None,
    )
    assert _c(httpx.ConnectError("refused", request=request), None) == (
        "Unavailable",
        True,
        "Unavailable: ConnectError (POST http://127.0.0.1:9/v1/completions): refused",
        None,
    )
    # Raised without a request attached: the message still says what failed.
    assert _c(httpx.ConnectError("refused")) == (
        "Unavailable",
        True,
        f"Unavailable: {ACTION}: ConnectError: refused",
        None,
    )
    assert _describe(httpx.ReadTimeout("")) == "ReadTimeout"
    assert _describe(httpx.ReadTimeout("on socket X")) == "ReadTimeout: on socket X"


def test_kubernetes_transport_errors_are_retryable() -> None:
    exc = urllib3.exceptions.ProtocolError("Connection aborted.")
    assert _c(exc) == ("Unavailable", True, f"Unavailable: {ACTION}: Connection aborted.", None)


def test_haproxy_errors_retry_only_what_heals() -> None:
    bad = HAProxyBadReply("socket s answered 'HTTP/1.0 400'")
    assert _c(bad) == (
        "HAProxyBadReply",
        True,
        f"HAProxyBadReply: {ACTION}: socket s answered 'HTTP/1.0 400'",
        None,
    )
    rejected = HAProxyError("No such server.", command="set weight x/y 1")
    assert _c(rejected, None) == ("HAProxyRejected", False, "HAProxyRejected: No such server.", None)
    unreachable = HAProxyError("cannot connect to s")
    unreachable.__cause__ = ConnectionRefusedError(111, "refused")
    assert _c(unreachable) == ("Unavailable", True, f"Unavailable: {ACTION}: cannot connect to s", None)


def test_os_level_and_validation_errors() -> None:
    assert _c(TimeoutError("slow")) == ("Unavailable", True, f"Unavailable: {ACTION}: slow", None)
    assert _c(ConnectionResetError("reset"), None) == ("Unavailable", True, "Unavailable: reset", None)
    assert _c(ValueError("weight 300 out of range")) == (
        "Invalid",
        False,
        f"Invalid: {ACTION}: weight 300 out of range",
        None,
    )
    # A garbled answer is not our input: decode errors keep retrying.
    decode = json.JSONDecodeError("Expecting value", "x", 0)
    assert _c(decode, None) == ("JSONDecodeError", True, "Expecting value: line 1 column 1 (char 0)", None)
    unicode = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    assert classify(unicode).kind == "UnicodeDecodeError" and classify(unicode).retryable
    assert _c(KeyError("x")) == ("KeyError", True, f"{ACTION}: 'x'", None)
    assert _c(RuntimeError("boom"), None) == ("RuntimeError", True, "boom", None)


def test_classified_errors_pass_through_unchanged() -> None:
    err = ErrorClass(kind="Conflict", retryable=True, message="m", retry_after_s=2.0)
    exc = ProviderError(err)
    assert str(exc) == "m" and exc.error is err
    assert classify(exc, ACTION) is err


def test_rollout_timeout_names_the_deployment_and_what_was_missing() -> None:
    state = DeploymentState(name="llm-stable", namespace="inference", replicas=3, ready_replicas=1)
    exc = RolloutTimeout(state, 90.0, "1/3 ready")
    assert exc.state is state and exc.missing == "1/3 ready"
    assert exc.error.model_dump() == {
        "kind": "RolloutTimeout",
        "retryable": False,
        "retry_after_s": None,
        "message": "deployment inference/llm-stable not rolled out after 90s: 1/3 ready",
    }
    assert str(exc) == "deployment inference/llm-stable not rolled out after 90s: 1/3 ready"
    assert classify(exc) is exc.error
    assert RolloutTimeout(state, 2.5, "x").error.message.endswith(" after 2.5s: x")
