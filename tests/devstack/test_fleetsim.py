"""fleetsim, the vLLM stand-in: OpenAI compatibility, vLLM metrics, identity headers and faults."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import httpx
import openai
import pytest
import pytest_asyncio
from aiohttp import web
from openai.types.chat import ChatCompletionMessageParam

from drctl.devstack.fleetsim import FleetsimSettings, SettingsError, main, runner
from drctl.devstack.fleetsim_openai import parse_request
from tests.support.ports import free_port
from tests.support.wait import assert_eventually, wait_until

MODEL = "fleetsim-tiny"
TTFT_MS = 60.0
IDENTITY = {
    "X-Fleetsim-Region": "us-west-1",
    "X-Fleetsim-Track": "canary",
    "X-Fleetsim-Replica": "llm-canary-0",
    "X-Fleetsim-Version": "v1.2.3",
}
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")


async def _serve(settings: FleetsimSettings) -> tuple[str, web.AppRunner]:
    app_runner = runner(settings)  # with the server options `main` uses (abort on client hang-up)
    await app_runner.setup()
    port = free_port()
    await web.TCPSite(app_runner, "127.0.0.1", port).start()
    return f"http://127.0.0.1:{port}", app_runner


@pytest_asyncio.fixture(scope="session")
async def fleetsim_url() -> AsyncIterator[str]:
    settings = FleetsimSettings(
        region="us-west-1",
        track="canary",
        replica="llm-canary-0",
        version="v1.2.3",
        ttft_ms=TTFT_MS,
        itl_ms=2,
    )
    url, runner = await _serve(settings)
    yield url
    await runner.cleanup()


@pytest_asyncio.fixture
async def http(fleetsim_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=fleetsim_url, timeout=10, trust_env=False) as client:
        yield client
        # Faults live on the shared session server: never let one leak into the next test.
        await client.delete("/admin/fault")


@pytest_asyncio.fixture
async def oai(fleetsim_url: str, http: httpx.AsyncClient) -> AsyncIterator[openai.AsyncOpenAI]:
    # max_retries=0: the client would otherwise retry injected 500s and hide them.
    client = openai.AsyncOpenAI(base_url=f"{fleetsim_url}/v1", api_key="unused", max_retries=0, timeout=10)
    yield client
    await client.close()


def parse_metrics(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Prometheus text → {(name, labels): value}; fails on any line that is not valid exposition."""
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, f"not a Prometheus sample line: {line!r}"
        labels = frozenset(re.findall(r'([a-zA-Z_]\w*)="([^"]*)"', m["labels"] or ""))
        samples[(m["name"], labels)] = float(m["value"])
    return samples


def metric(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    want = {("model_name", MODEL), *labels.items()}
    found = [v for (n, ls), v in samples.items() if n == name and want <= ls]
    assert len(found) == 1, f"{name} {labels}: {found}"
    return found[0]


async def scrape(http: httpx.AsyncClient) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    resp = await http.get("/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    return parse_metrics(resp.text)


async def test_openai_client_completion(oai: openai.AsyncOpenAI, http: httpx.AsyncClient) -> None:
    models = await oai.models.list()
    assert [m.id for m in models.data] == [MODEL]

    first = await oai.completions.create(model=MODEL, prompt="hello fleet", max_tokens=5)
    again = await oai.completions.create(model=MODEL, prompt="hello fleet", max_tokens=5)
    assert first.choices[0].finish_reason == "length"
    assert len(first.choices[0].text.split()) == 5
    assert first.choices[0].text == again.choices[0].text  # deterministic filler
    assert first.usage is not None and first.usage.completion_tokens == 5 and first.usage.prompt_tokens == 2

    default = await oai.completions.create(model=MODEL, prompt="x")
    assert default.usage is not None and default.usage.completion_tokens == 16


async def test_openai_client_streamed_chat_respects_ttft(oai: openai.AsyncOpenAI) -> None:
    messages: list[ChatCompletionMessageParam] = [{"role": "user", "content": "status?"}]
    # Warm up the connection and the client's lazy imports, so that only the server's TTFT is timed.
    async for _ in await oai.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=1, stream=True
    ):
        pass
    started = time.monotonic()
    stream = await oai.chat.completions.create(
        model=MODEL,
        messages=messages,
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces: list[str] = []
    finishes: list[str | None] = []
    first_token_s: float | None = None
    usage = None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content and first_token_s is None:
                first_token_s = time.monotonic() - started
            pieces.append(choice.delta.content or "")
            finishes.append(choice.finish_reason)
    assert len(pieces) == 8 and all(p.strip() for p in pieces)
    assert finishes[-1] == "length" and set(finishes[:-1]) == {None}
    assert usage is not None and usage.completion_tokens == 8
    assert first_token_s is not None and first_token_s * 1000 >= TTFT_MS


async def test_metrics_are_vllm_shaped_and_move(oai: openai.AsyncOpenAI, http: httpx.AsyncClient) -> None:
    before = await scrape(http)
    await oai.completions.create(model=MODEL, prompt="count me", max_tokens=7)
    after = await scrape(http)

    def delta(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert delta("vllm:generation_tokens_total") == 7
    assert delta("vllm:request_success_total", finished_reason="length") == 1
    assert delta("vllm:time_to_first_token_seconds_count") == 1
    assert delta("vllm:time_to_first_token_seconds_sum") >= TTFT_MS / 1000
    # The one new TTFT (>= 60 ms) lands in buckets from le=0.06 upward, never below.
    assert delta("vllm:time_to_first_token_seconds_bucket", le="0.04") == 0
    assert delta("vllm:time_to_first_token_seconds_bucket", le="+Inf") == 1
    buckets = sorted(
        (float(dict(ls)["le"]), v)
        for (n, ls), v in after.items()
        if n == "vllm:time_to_first_token_seconds_bucket"
    )
    assert len(buckets) > 10 and [v for _, v in buckets] == sorted(v for _, v in buckets)  # cumulative
    assert buckets[-1][1] == metric(after, "vllm:time_to_first_token_seconds_count")
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert metric(after, name) == 0


async def test_max_num_seqs_queues_requests_and_shows_in_metrics() -> None:
    url, runner = await _serve(FleetsimSettings(max_num_seqs=2, ttft_ms=0, itl_ms=40))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=10, trust_env=False) as client:
            body = {"model": MODEL, "prompt": "busy", "max_tokens": 10}
            calls = [asyncio.create_task(client.post("/v1/completions", json=body)) for _ in range(5)]

            async def saturated() -> bool:
                samples = parse_metrics((await client.get("/metrics")).text)
                running, waiting = (metric(samples, f"vllm:num_requests_{k}") for k in ("running", "waiting"))
                assert (running, waiting) == (2, 3), (running, waiting)
                return metric(samples, "vllm:kv_cache_usage_perc") == 1.0

            await assert_eventually(saturated, timeout_s=5, interval_s=0.02, what="2 running, 3 waiting")
            assert [r.status_code for r in await asyncio.gather(*calls)] == [200] * 5
            samples = parse_metrics((await client.get("/metrics")).text)
            assert (
                metric(samples, "vllm:num_requests_running")
                == metric(samples, "vllm:num_requests_waiting")
                == 0
            )
            assert metric(samples, "vllm:request_success_total", finished_reason="length") == 5
    finally:
        await runner.cleanup()


async def test_identity_headers_on_every_response(http: httpx.AsyncClient) -> None:
    responses = [
        await http.get("/health"),
        await http.get("/metrics"),
        await http.get("/no-such-path"),
        await http.post("/v1/completions", json={"prompt": "no model"}),
        await http.post(
            "/v1/completions", json={"model": MODEL, "prompt": "s", "max_tokens": 2, "stream": True}
        ),
    ]
    await http.post("/admin/fault", json={"down": True})
    responses.append(await http.get("/health"))
    assert [r.status_code for r in responses] == [200, 200, 404, 400, 200, 503]
    for resp in responses:
        assert {k: resp.headers.get(k) for k in IDENTITY} == IDENTITY, resp.request.url


async def test_bad_requests_get_openai_style_errors(oai: openai.AsyncOpenAI, http: httpx.AsyncClient) -> None:
    bad_bodies = [
        {"prompt": "hi"},
        {"model": MODEL, "prompt": {"not": "text"}},
        {"model": MODEL, "prompt": "hi", "max_tokens": 0},
        {"model": MODEL, "prompt": "hi", "stream": "yes"},
    ]
    for body in bad_bodies:
        resp = await http.post("/v1/completions", json=body)
        assert resp.status_code == 400, body
        assert resp.json()["error"]["type"] == "BadRequestError" and resp.json()["error"]["message"]
    raw = await http.post(
        "/v1/chat/completions", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert raw.status_code == 400
    with pytest.raises(openai.BadRequestError, match="messages"):
        await oai.chat.completions.create(model=MODEL, messages=[])
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        await oai.completions.create(model="other-model", prompt="hi")


def test_max_tokens_default_and_cap() -> None:
    assert parse_request({"model": MODEL, "prompt": "x"}, chat=False).max_tokens == 16
    assert parse_request({"model": MODEL, "prompt": "x", "max_tokens": 5000}, chat=False).max_tokens == 512
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 3}
    assert parse_request(chat, chat=True).max_tokens == 3


async def test_fault_down_spares_admin_and_clears(http: httpx.AsyncClient) -> None:
    resp = await http.post("/admin/fault", json={"down": True})
    assert resp.json()["down"] is True
    for path in ("/health", "/v1/models", "/metrics"):
        assert (await http.get(path)).status_code == 503, path
    assert (await http.get("/admin/fault")).status_code == 200
    assert (await http.delete("/admin/fault")).json()["down"] is False
    assert (await http.get("/health")).text == "ok"


async def test_fault_error_rate_fails_that_fraction(oai: openai.AsyncOpenAI, http: httpx.AsyncClient) -> None:
    await http.post("/admin/fault", json={"error_rate": 0.5})
    body = {"model": MODEL, "prompt": "p", "max_tokens": 1}
    results = await asyncio.gather(*(http.post("/v1/completions", json=body) for _ in range(40)))
    errors = [r for r in results if r.status_code == 500]
    assert 16 <= len(errors) <= 24, len(errors)
    assert {r.status_code for r in results} == {200, 500}
    assert errors[0].json()["error"]["code"] == 500
    with pytest.raises(openai.InternalServerError):
        for _ in range(3):  # at rate 0.5 one of two consecutive calls fails
            await oai.completions.create(model=MODEL, prompt="p", max_tokens=1)

    await http.delete("/admin/fault")
    again = await asyncio.gather(*(http.post("/v1/completions", json=body) for _ in range(10)))
    assert [r.status_code for r in again] == [200] * 10


async def test_fault_added_latency_adds_to_ttft(http: httpx.AsyncClient) -> None:
    await http.post("/admin/fault", json={"added_latency_ms": 150})
    body = {"model": MODEL, "prompt": "slow", "max_tokens": 2, "stream": True}
    started = time.monotonic()
    async with http.stream("POST", "/v1/completions", json=body) as resp:
        async for line in resp.aiter_lines():
            if line.startswith("data: {"):
                ttft_ms = (time.monotonic() - started) * 1000
                break
    assert ttft_ms >= TTFT_MS + 150


async def test_fault_hang_holds_until_cleared(http: httpx.AsyncClient) -> None:
    await http.post("/admin/fault", json={"hang": True})
    held = [
        asyncio.create_task(http.get("/health")),
        asyncio.create_task(
            http.post("/v1/completions", json={"model": MODEL, "prompt": "h", "max_tokens": 1})
        ),
    ]

    async def both_held() -> bool:
        return (await http.get("/admin/fault")).json()["held_requests"] == 2

    await assert_eventually(both_held, timeout_s=5, what="two requests held by the hang fault")
    assert not any(t.done() for t in held)
    await http.delete("/admin/fault")
    health, completion = await asyncio.wait_for(asyncio.gather(*held), timeout=5)
    assert (health.status_code, health.text) == (200, "ok")
    assert completion.status_code == 200 and completion.json()["usage"]["completion_tokens"] == 1


async def test_fault_body_is_validated_and_posts_merge(http: httpx.AsyncClient) -> None:
    for bad in ({"bogus": True}, {"down": "yes"}, {"error_rate": 1.5}, {"added_latency_ms": True}, [1]):
        resp = await http.post("/admin/fault", json=bad)
        assert resp.status_code == 400, bad
        assert resp.json()["error"]["message"]
    await http.post("/admin/fault", json={"error_rate": 0.25})
    state = (await http.post("/admin/fault", json={"added_latency_ms": 10})).json()
    assert state == {
        "down": False,
        "error_rate": 0.25,
        "added_latency_ms": 10.0,
        "hang": False,
        "held_requests": 0,
    }


def test_settings_from_env_validates(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = FleetsimSettings.from_env({"FLEETSIM_TTFT_MS": "12.5", "FLEETSIM_MAX_NUM_SEQS": "4"})
    assert (settings.ttft_ms, settings.max_num_seqs, settings.itl_ms, settings.model) == (12.5, 4, 5.0, MODEL)
    assert settings.vllm_metrics == "v1" and settings.load_s == 0
    assert (
        FleetsimSettings.from_env({"FLEETSIM_VLLM_METRICS": "v0", "FLEETSIM_LOAD_S": "3"}).vllm_metrics
        == "v0"
    )
    for name, value in [
        ("TTFT_MS", "fast"), ("ERROR_RATE", "2"), ("MAX_NUM_SEQS", "0"), ("ITL_MS", "-1"),
        ("VLLM_METRICS", "v2"), ("VLLM_METRICS", "both"), ("LOAD_S", "-1"),
    ]:  # fmt: skip
        with pytest.raises(SettingsError, match=f"FLEETSIM_{name}"):
            FleetsimSettings.from_env({f"FLEETSIM_{name}": value})
    monkeypatch.setenv("FLEETSIM_ERROR_RATE", "lots")
    with pytest.raises(SystemExit) as exited:
        main(["--port", "1"])
    assert exited.value.code == 2
    assert "FLEETSIM_ERROR_RATE" in capsys.readouterr().err


def test_subprocess_serves_and_stops_on_sigterm() -> None:
    port = free_port()
    env = {**os.environ, **{f"FLEETSIM_{k.split('-')[-1].upper()}": v for k, v in IDENTITY.items()}}
    proc = subprocess.Popen(
        [sys.executable, "-m", "drctl.devstack.fleetsim", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=2, trust_env=False) as client:

            def healthy() -> httpx.Response | None:  # None (falsy) until the port answers
                try:
                    return client.get("/health")
                except httpx.TransportError:
                    assert proc.poll() is None, "fleetsim exited during start-up"
                    return None

            resp = wait_until(healthy, timeout_s=15, what="fleetsim /health")
            assert resp is not None
            assert (resp.status_code, resp.text) == (200, "ok")
            assert {k: resp.headers.get(k) for k in IDENTITY} == IDENTITY
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
        assert proc.stdout is not None
        proc.stdout.close()


@pytest.mark.parametrize("surface", ["v0", "v1"])
async def test_one_vllm_metric_surface_at_a_time(surface: str) -> None:
    """FLEETSIM_VLLM_METRICS: V0's names (model_name label) or V1's (model_name and engine), never both."""
    url, runner = await _serve(FleetsimSettings(vllm_metrics=surface, ttft_ms=0, itl_ms=0))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=10, trust_env=False) as client:
            body = {"model": MODEL, "prompt": "x", "max_tokens": 1}
            assert (await client.post("/v1/completions", json=body)).status_code == 200
            samples = await scrape(client)
    finally:
        await runner.cleanup()
    names = {n for n, _ in samples}
    kv, gone = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")[:: 1 if surface == "v1" else -1]
    assert kv in names and gone not in names
    # vLLM v0.6.3 has no HTTP instrumentator: its failures show in no counter (PR 15657, 2025, added one).
    assert ("http_requests_total" in names) == (surface == "v1")
    vllm = [dict(ls) for n, ls in samples if n.startswith("vllm:")]
    assert all(ls["model_name"] == MODEL for ls in vllm if "num_gpu_blocks" not in ls)
    assert all(("engine" in ls) == (surface == "v1") for ls in vllm)
    # vLLM's info gauge of its CacheConfig: no model_name, the figures are labels. max_num_seqs (16)
    # sequences of max_model_len (2048) tokens fill the KV cache: 16 x 128 blocks of 16 tokens.
    (info,) = [ls for n, ls in samples if n == "vllm:cache_config_info"]
    assert "model_name" not in dict(info) and samples[("vllm:cache_config_info", info)] == 1
    labels = dict(info)
    assert (labels["block_size"], labels["num_gpu_blocks"], labels["kv_cache_size_tokens"]) == (
        "16",
        "2048",
        "32768",
    )
    assert float(labels["kv_cache_max_concurrency"]) == 16
    engine = {"engine": "0"} if surface == "v1" else {}
    assert metric(samples, "vllm:request_success_total", finished_reason="length", **engine) == 1
    assert metric(samples, "vllm:time_to_first_token_seconds_count", **engine) == 1


def _hist(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str) -> dict[str, float]:
    """One histogram's cumulative buckets by `le`, plus `sum` and `count`."""
    out = {dict(ls)["le"]: v for (n, ls), v in samples.items() if n == f"{name}_bucket"}
    return out | {"sum": metric(samples, f"{name}_sum"), "count": metric(samples, f"{name}_count")}


async def test_overload_ttft_grows_with_the_server_queue_and_its_histogram_records_it() -> None:
    """Six requests at once on two sequence slots: the later ones wait, and their server-side TTFT
    (vllm:time_to_first_token_seconds) includes that wait, as vLLM's does. Lower bounds only: a
    loaded machine can make the server slower, never faster than its queue."""
    url, app_runner = await _serve(FleetsimSettings(max_num_seqs=2, ttft_ms=20, itl_ms=20))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=10, trust_env=False) as client:
            body = {"model": MODEL, "prompt": "queue", "max_tokens": 5, "stream": True}

            async def ttft_s() -> float:
                started = time.monotonic()
                async with client.stream("POST", "/v1/completions", json=body) as resp:
                    assert resp.status_code == 200
                    first = None
                    async for line in resp.aiter_lines():
                        if first is None and line.startswith("data: {"):
                            first = time.monotonic() - started
                assert first is not None
                return first

            seen = sorted(await asyncio.gather(*(ttft_s() for _ in range(6))))
            samples = await scrape(client)
    finally:
        await app_runner.cleanup()
    # Each request holds its slot for its TTFT and 4 more tokens: >= 100 ms. Pairs wait 0, 1 and 2 holds.
    assert seen[2] >= 0.12 and seen[4] >= 0.22, seen
    ttft = _hist(samples, "vllm:time_to_first_token_seconds")
    assert ttft["count"] == 6 and ttft["0.1"] <= 2 and ttft["+Inf"] - ttft["0.1"] >= 4, ttft
    assert ttft["sum"] >= 6 * 0.02 + 2 * 0.1 + 2 * 0.2
    queued = _hist(samples, "vllm:request_queue_time_seconds")
    assert queued["count"] == 6 and queued["sum"] >= 2 * 0.1 + 2 * 0.2, queued


async def test_a_client_that_gives_up_is_aborted_from_the_queue() -> None:
    """vLLM has no queue timeout of its own: the client's (or gateway's) timeout ends the wait, and
    the server aborts the request, so it leaves vllm:num_requests_waiting and never runs."""
    url, app_runner = await _serve(FleetsimSettings(max_num_seqs=1, ttft_ms=0, itl_ms=100))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=10, trust_env=False) as client:
            body = {"model": MODEL, "prompt": "hold", "max_tokens": 10}
            holder = asyncio.create_task(client.post("/v1/completions", json=body))

            async def gauges() -> tuple[float, float]:
                samples = await scrape(client)
                return tuple(metric(samples, f"vllm:num_requests_{k}") for k in ("running", "waiting"))  # type: ignore[return-value]

            async def running_one() -> bool:
                return await gauges() == (1, 0)

            await assert_eventually(running_one, timeout_s=5, interval_s=0.02, what="one request running")
            async with httpx.AsyncClient(base_url=url, timeout=0.3, trust_env=False) as impatient:
                waiter = asyncio.create_task(impatient.post("/v1/completions", json=body))

                async def one_waiting() -> bool:
                    return await gauges() == (1, 1)

                await assert_eventually(one_waiting, timeout_s=5, interval_s=0.02, what="one waiting")
                with pytest.raises(httpx.ReadTimeout):
                    await waiter

            async def aborted() -> bool:
                return await gauges() == (1, 0)

            await assert_eventually(aborted, timeout_s=2, interval_s=0.02, what="the waiter aborted")
            assert (await holder).status_code == 200
            samples = await scrape(client)
    finally:
        await app_runner.cleanup()
    assert metric(samples, "vllm:request_success_total", finished_reason="length") == 1
    assert metric(samples, "vllm:time_to_first_token_seconds_count") == 1  # the aborted one never started
