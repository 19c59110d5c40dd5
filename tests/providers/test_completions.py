"""The one completion client: what counts as served, and where the serving region comes from."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from drctl.providers import completions
from tests.support.http_stub import Reply, Request, StubServer
from tests.support.ports import free_port


def _gateway(req: Request) -> Reply:
    """A gateway whose answer the path picks: /ok/v1/completions, /bare/..., /html/..., /down/..."""
    kind = req.path.split("/")[1]
    if kind == "down":
        return Reply(503, b"{}", content_type=None)
    body = b"<html>oops</html>" if kind == "html" else json.dumps({"choices": [{"text": "x"}]}).encode()
    return Reply(
        200, body, headers={"x-drctl-region": "us-east-1"} if kind == "ok" else {}, content_type=None
    )


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with StubServer(_gateway, port=free_port()) as server:
        yield server.url


def _ask(base: str, kind: str) -> completions.Answer:
    with httpx.Client(timeout=5, limits=completions.fresh_connections(1)) as client:
        return completions.complete_sync(
            client, completions.url_of(f"{base}/{kind}"), "m", "p", "x-drctl-region"
        )


def test_served_with_the_region_the_gateway_names(base: str) -> None:
    answer = _ask(base, "ok")
    assert (answer.ok, answer.status, answer.region, answer.error) == (True, 200, "us-east-1", None)


def test_an_answer_without_the_region_header_is_served_but_unattributed(base: str) -> None:
    assert (_ask(base, "bare").ok, _ask(base, "bare").region) == (True, None)


def test_a_200_that_is_not_a_completion_is_not_served(base: str) -> None:
    answer = _ask(base, "html")
    assert (
        not answer.ok and answer.status == 200 and answer.error and answer.error.startswith("JSONDecodeError")
    )


def test_an_error_status_and_a_refused_connection_are_failures(base: str) -> None:
    down = _ask(base, "down")
    assert (down.ok, down.status, down.error) == (False, 503, "HTTPStatusError: HTTP 503")
    refused = _ask(f"http://127.0.0.1:{free_port()}", "ok")
    assert (
        not refused.ok
        and refused.status is None
        and refused.error
        and refused.error.startswith("ConnectError")
    )


async def test_async_client_gives_the_same_answer(base: str) -> None:
    async with httpx.AsyncClient(timeout=5) as client:
        answer = await completions.complete(
            client, completions.url_of(f"{base}/ok"), "m", "p", "x-drctl-region"
        )
    assert (answer.ok, answer.region) == (True, "us-east-1")
