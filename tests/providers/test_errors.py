"""The error table against real client exceptions from real HTTP round trips.

A tiny aiohttp server answers like a Kubernetes API server (Status bodies) and like S3 (XML
errors); the official kubernetes client, boto3 and httpx raise what they raise for those answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import boto3
import httpx
import pytest
from aiohttp import web
from botocore.config import Config
from botocore.exceptions import ClientError
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from drctl.config.schema import KubeConfig, RegionConfig
from drctl.providers.errors import ProviderError, _by_status, classify
from drctl.providers.haproxy_runtime import HAProxyError, HAProxyRuntime
from drctl.providers.kubernetes import KubernetesPlatform
from tests.support.loop_thread import LoopThread
from tests.support.ports import free_port

KUBE = {  # deployment name -> (status, reason, message) as a real API server words them
    "forbidden": (
        403,
        "Forbidden",
        'deployments.apps "forbidden" is forbidden: User "system:serviceaccount:drctl:drctl" '
        'cannot get resource "deployments" in API group "apps" in the namespace "inference"',
    ),
    "unauthorized": (401, "Unauthorized", "Unauthorized"),
    "missing": (404, "NotFound", 'deployments.apps "missing" not found'),
    "conflict": (
        409,
        "Conflict",
        'Operation cannot be fulfilled on deployments.apps "conflict": the object has been modified',
    ),
    "invalid": (422, "Invalid", 'Deployment.apps "invalid" is invalid: spec.replicas: Invalid value: -1'),
    "bad": (400, "BadRequest", "the body of the request was in an unknown format"),
    "throttled": (
        429,
        "TooManyRequests",
        "the server has received too many requests and has asked us to try again later",
    ),
    "unavailable": (503, "ServiceUnavailable", "the server is currently unable to handle the request"),
}
S3 = {  # bucket -> (status, code)
    "denied": (403, "AccessDenied"),
    "nokey": (404, "NoSuchKey"),
    "slow": (503, "SlowDown"),
    "broken": (500, "InternalError"),
}


def _app() -> web.Application:
    async def deployment(request: web.Request) -> web.Response:
        status, reason, message = KUBE[request.match_info["name"]]
        details = {"name": request.match_info["name"], "group": "apps", "kind": "deployments"}
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                "reason": reason, "details": details, "code": status}  # fmt: skip
        return web.json_response(body, status=status)

    async def s3_object(request: web.Request) -> web.Response:
        status, code = S3[request.match_info["bucket"]]
        xml = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>{code} says no</Message></Error>"
        return web.Response(text=xml, status=status, content_type="application/xml")

    async def hang(_request: web.Request) -> web.Response:
        await asyncio.sleep(1.0)  # well past the client timeout, short enough not to delay teardown
        return web.Response(text="late")

    async def denied(_request: web.Request) -> web.Response:
        return web.Response(status=403, text="no")

    app = web.Application()
    app.router.add_get("/apis/apps/v1/namespaces/inference/deployments/{name}", deployment)
    app.router.add_get("/hang", hang)
    app.router.add_get("/denied", denied)
    app.router.add_get("/{bucket}/{key}", s3_object)
    return app


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    lt = LoopThread()
    port = free_port()
    lt.serve_app(_app(), port)
    yield f"http://127.0.0.1:{port}"
    lt.close()


def _kube_error(url: str, name: str) -> ApiException:
    api = client.AppsV1Api(client.ApiClient(client.Configuration(host=url)))
    with pytest.raises(ApiException) as info:
        api.read_namespaced_deployment(name, "inference")
    return info.value


@pytest.mark.parametrize("name", sorted(KUBE))
def test_kubernetes_statuses(server_url: str, name: str) -> None:
    # The status table itself is pinned row by row in tests/units/test_error_table.py; here the
    # status of a real client exception must reach it, with the server's words kept.
    err = classify(_kube_error(server_url, name), action=f"get deployments inference/{name}")
    kind, retryable = _by_status(KUBE[name][0])
    assert (err.kind, err.retryable) == (kind, retryable)
    assert err.message.startswith(f"{kind}: get deployments inference/{name}: HTTP {KUBE[name][0]} ")
    assert KUBE[name][2] in err.message  # the API server's own explanation survives


def test_platform_403_names_verb_and_resource(server_url: str) -> None:
    region = RegionConfig(
        name="us-west-1", weight=1, gateway_url="http://127.0.0.1:1", kube=KubeConfig(api_url=server_url)
    )
    platform = KubernetesPlatform(region)
    with pytest.raises(ProviderError) as info:
        platform.get_deployment("forbidden")
    err = classify(info.value)
    assert err.kind == "Forbidden" and not err.retryable
    assert "get deployments inference/forbidden (cluster of us-west-1)" in err.message
    assert 'cannot get resource "deployments"' in err.message
    assert "RBAC" in err.message  # tells the operator what to fix
    platform.close()


@pytest.mark.parametrize(
    ("bucket", "kind", "retryable"),
    [("denied", "Forbidden", False), ("nokey", "NotFound", False), ("slow", "RateLimited", True),
     ("broken", "ServerError", True)],
)  # fmt: skip
def test_aws_codes(server_url: str, bucket: str, kind: str, retryable: bool) -> None:
    s3 = boto3.client(
        "s3", endpoint_url=server_url, region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s",
        config=Config(retries={"total_max_attempts": 1}, s3={"addressing_style": "path"}),
    )  # fmt: skip
    with pytest.raises(ClientError) as info:
        s3.get_object(Bucket=bucket, Key="report.json")
    err = classify(info.value, action=f"read s3://{bucket}/report.json")
    assert (err.kind, err.retryable) == (kind, retryable)
    assert f"read s3://{bucket}/report.json: GetObject failed with {S3[bucket][1]}" in err.message


async def test_httpx_errors(server_url: str) -> None:
    async with httpx.AsyncClient(timeout=0.3) as http:
        with pytest.raises(httpx.ConnectError) as refused:
            await http.get(f"http://127.0.0.1:{free_port()}/health")
        with pytest.raises(httpx.TimeoutException) as slow:
            await http.get(f"{server_url}/hang")
        resp = await http.get(f"{server_url}/denied")
        with pytest.raises(httpx.HTTPStatusError) as status:
            resp.raise_for_status()
    assert (classify(refused.value).kind, classify(refused.value).retryable) == ("Unavailable", True)
    assert (classify(slow.value).kind, classify(slow.value).retryable) == ("Timeout", True)
    denied = classify(status.value)
    assert (denied.kind, denied.retryable) == ("Forbidden", False)
    assert "/denied" in denied.message


def test_haproxy_errors(tmp_path: object) -> None:
    with pytest.raises(HAProxyError) as unreachable:
        HAProxyRuntime("/nonexistent/drctl-test.sock", timeout_s=0.5).command("show info")
    err = classify(unreachable.value)
    assert (err.kind, err.retryable) == ("Unavailable", True)
    rejected = classify(HAProxyError("HAProxy rejected 'set weight global/nope 5': No such server."))
    assert (rejected.kind, rejected.retryable) == ("HAProxyRejected", False)
