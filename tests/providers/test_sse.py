"""The one SSE reader, against vLLM's stream format, through both clients that read it: the prober
(aiohttp) and the inference client's time to first token (httpx), on a loopback server that sends
the bytes vLLM sends, cut where TCP may cut them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import httpx
import pytest
from aiohttp import web

from drctl.providers import sse
from drctl.providers.completions import time_to_first_token
from drctl.providers.probe_http import Failed, completion

# vLLM 0.x /v1/completions with "stream": true: one `data:` line per chunk, a blank line, [DONE].
CHUNK = (
    b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":'
    b'[{"index":0,"text":"ok","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}\n\n'
)
VLLM = CHUNK + CHUNK.replace(b'"finish_reason":null', b'"finish_reason":"length"') + b"data: [DONE]\n\n"
STREAMS = {
    "vllm": VLLM,
    "crlf-and-comments": b": keep-alive\r\n\r\n" + VLLM.replace(b"\n", b"\r\n"),
    "cut-before-done": CHUNK,
    "only-done": b"data: [DONE]\n\n",
    "not-json": b"data: <html>busy</html>\n\ndata: [DONE]\n\n",
    "cut-mid-event": CHUNK[:40],
}


@pytest.fixture
async def server() -> AsyncIterator[str]:
    async def stream(request: web.Request) -> web.StreamResponse:
        body = STREAMS[request.query["s"]]
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i in range(0, len(body), 7):  # 7-byte writes: events and lines split across reads
            await resp.write(body[i : i + 7])
            await asyncio.sleep(0)
        return resp

    app = web.Application()
    app.router.add_post("/{s}/v1/completions", lambda r: stream(_with_query(r)))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # noqa: SLF001
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


def _with_query(r: web.Request) -> web.Request:
    return r.clone(rel_url=r.rel_url.with_query(s=r.match_info["s"]))


async def _probe(base: str, name: str) -> float | Failed:
    async with aiohttp.ClientSession() as session:
        return await completion(session, f"{base}/{name}", 10.0, "m")


async def _ttft(base: str, name: str) -> float | None:
    async with httpx.AsyncClient(timeout=10) as client:
        return await time_to_first_token(client, f"{base}/{name}", "m", "ping")


async def test_a_vllm_stream_is_served_for_both_readers(server: str) -> None:
    for name in ("vllm", "crlf-and-comments"):
        assert isinstance(await _probe(server, name), float), name
        assert isinstance(await _ttft(server, name), float), name


@pytest.mark.parametrize(
    "name, probe_error, timed",
    [
        ("cut-before-done", None, False),  # the prober needs the first chunk only
        ("only-done", "ended without a data chunk", False),
        # The TTFT client times the stream and leaves judging its content to the prober.
        ("not-json", "not JSON", True),
        ("cut-mid-event", "ended without a data chunk", False),
    ],
)
async def test_broken_streams_fail_as_a_user_would_see_them(
    server: str, name: str, probe_error: str | None, timed: bool
) -> None:
    probed = await _probe(server, name)
    if probe_error is None:
        assert isinstance(probed, float)
    else:
        assert isinstance(probed, Failed) and probed.cls == "bad_response" and probe_error in str(probed)
    # A stream that never reached [DONE], or had no data before it, is a broken answer: no TTFT.
    assert (await _ttft(server, name) is not None) == timed


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def test_events_follow_the_event_stream_format() -> None:
    got = [
        d
        async for d in sse.data_events(
            _lines(
                ": comment",
                "event: completion",
                "data: a",
                "data:b",
                "id: 7",
                "",
                "",
                "data:  c",
                "",
                "data: x",
            )
        )
    ]
    # Multi-line data joined, one leading space dropped, empty events skipped, the unterminated one dropped.
    assert got == ["a\nb", " c"]
    assert sse.is_done(" [DONE] ") and not sse.is_done("[DONE]x")
