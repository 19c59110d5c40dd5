"""The one completion client: what counts as served, and where the serving region comes from."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from drctl.providers import completions
from tests.helpers import free_port


class _Gateway(BaseHTTPRequestHandler):
    """A gateway whose answer the path picks: /ok/v1/completions, /bare/..., /html/..., /down/..."""

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        self.rfile.read(int(self.headers.get("content-length", 0)))
        kind = self.path.split("/")[1]
        status, body = (
            (503, b"{}")
            if kind == "down"
            else (
                200,
                b"<html>oops</html>" if kind == "html" else json.dumps({"choices": [{"text": "x"}]}).encode(),
            )
        )
        self.send_response(status)
        if kind == "ok":
            self.send_header("x-drctl-region", "us-east-1")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


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
