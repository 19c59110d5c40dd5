"""The prober at fleet scale, against the bench's canned-vLLM HAProxy (a real server process).

Pooling must hide no dead server, the concurrency bound must never turn queueing into DOWN, and
the completion sample must rotate over every replica.
"""

from __future__ import annotations

import asyncio
import math
import signal
from collections.abc import Iterator

import pytest
from aiohttp import web

from bench.probe_baseline import InferenceProber as OldProber
from bench.probe_scale import MODEL, CannedServer, StaticReplicas, bench_config, targets
from drctl.models.health import ProbeStatus
from drctl.providers.probe import InferenceProber, rotating_sample
from tests.support.ports import free_port, free_port_run


@pytest.fixture
def canned() -> Iterator[tuple[CannedServer, list[str]]]:
    n = 400
    base = free_port_run(n)
    with CannedServer(n, base) as server:
        yield server, targets(n, base)


def test_rotating_sample_covers_every_replica_within_ceil_n_over_width_rounds() -> None:
    names = [f"r{i}" for i in range(23)]
    width = math.ceil(0.1 * len(names))  # 3
    rounds = [rotating_sample(list(reversed(names)), 0.1, k) for k in range(math.ceil(len(names) / width))]
    assert all(len(r) == width for r in rounds)
    assert set().union(*rounds) == set(names)
    assert rotating_sample(names, 0.1, 5) == rotating_sample(names, 0.1, 5)  # deterministic
    assert rotating_sample(names, 1.0, 7) == set(names)
    assert rotating_sample(["only"], 0.01, 3) == {"only"} and rotating_sample([], 0.5, 0) == set()


async def test_sampled_replicas_get_completions_and_the_rest_health_and_metrics(
    canned: tuple[CannedServer, list[str]],
) -> None:
    _, urls = canned
    prober = InferenceProber(bench_config(urls[0], 8, 0.1), replica_source=StaticReplicas(urls[1:21]))
    seen: set[str] = set()
    for _ in range(10):  # 20 replicas, width 2: every one is sampled within 10 rounds
        p = await prober.probe_region("r1")
        assert p.status == ProbeStatus.HEALTHY, p.reason
        sampled = {r.target for r in p.replicas if r.ttft_ms is not None}
        assert len(sampled) == 2 and all(r.models_ok for r in p.replicas if r.target in sampled)
        assert all(r.running == 1.0 and r.kv_cache_usage == 0.1 for r in p.replicas)  # /metrics read by all
        assert p.gateway.ttft_ms is not None and p.gateway.models_ok  # the gateway every round
        seen |= sampled
    assert len(seen) == 20


async def test_killed_server_is_down_on_the_very_next_round_with_a_pooled_session(
    canned: tuple[CannedServer, list[str]],
) -> None:
    server, urls = canned
    prober = InferenceProber(bench_config(urls[0], 8, 1.0), replica_source=StaticReplicas(urls[1:4]))
    assert (await prober.probe_region("r1")).status == ProbeStatus.HEALTHY
    assert server.proc is not None
    server.proc.send_signal(signal.SIGKILL)
    server.proc.wait(5)
    p = await prober.probe_region("r1")
    assert p.status == ProbeStatus.DOWN
    assert all(t.status == ProbeStatus.DOWN and t.error_class == "connect" for t in [p.gateway, *p.replicas])


async def test_a_replicas_requests_share_one_pooled_connection() -> None:
    peers: list[object] = []

    async def health(request: web.Request) -> web.Response:
        peers.append(request.transport)
        return web.Response(text="ok")

    async def metrics(request: web.Request) -> web.Response:
        peers.append(request.transport)
        return web.Response(text="vllm:num_requests_running 2\n")

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        url = f"http://127.0.0.1:{port}"
        replicas = StaticReplicas([url, url])
        replicas.endpoints[1].name = "zz-sampled-never"  # sorted last: not in round 0's sample of 1
        prober = InferenceProber(bench_config("http://127.0.0.1:1", 1, 0.5), replica_source=replicas)
        p = await prober.probe_region("r1")
        unsampled = next(r for r in p.replicas if r.target == "zz-sampled-never")
        assert unsampled.status == ProbeStatus.HEALTHY and unsampled.running == 2.0
        # With one target at a time, the last two requests are that replica's /health and /metrics.
        assert peers[-1] is peers[-2]
    finally:
        await runner.cleanup()


async def slow_replica(delay_s: float) -> tuple[web.AppRunner, str]:
    """A vLLM stand-in answering every request after `delay_s`: queueing time grows with the count."""

    async def answer(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(delay_s)
        if request.path == "/v1/models":
            return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        if request.path == "/v1/completions":
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b'data: {"choices": [{"index": 0, "text": "ok"}]}\n\ndata: [DONE]\n\n')
            return resp
        return web.Response(text="vllm:num_requests_running 1\n" if request.path == "/metrics" else "ok")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}"


async def test_queueing_longer_than_the_budget_is_no_false_down() -> None:
    # 40 targets, one at a time, each at least 2 x 50 ms: about 4 s of queueing against a 1.1 s
    # target budget, while every single answer (50 ms) is 10x inside its 0.5 s deadline.
    runner, url = await slow_replica(0.05)
    try:
        cfg = bench_config(url, 1, 0.1, timeout_s=0.5, ttft_ms=100.0)
        # A round budget far beyond the queue: this test is about per-target deadlines alone.
        new = InferenceProber(cfg, replica_source=StaticReplicas([url] * 40), round_budget_s=60)
        p = await new.probe_region("r1")
        assert p.duration_ms / 1000 > 2 * new.target_budget_s, "no target queued longer than its budget"
        assert len(p.replicas) == 40
        assert [t.target for t in [p.gateway, *p.replicas] if t.status != ProbeStatus.HEALTHY] == [], p.reason
        # The same round with the old prober: its deadline ran while targets queued.
        old = await OldProber(cfg, replica_source=StaticReplicas([url] * 40)).probe_region("r1")
        assert sum(t.status == ProbeStatus.DOWN for t in old.replicas) > 0
    finally:
        await runner.cleanup()


async def test_a_round_ends_within_its_budget_and_unreached_replicas_are_not_down() -> None:
    # 100 targets one at a time at >= 100 ms each cannot finish in the 1.5 s round budget.
    runner, url = await slow_replica(0.05)
    try:
        prober = InferenceProber(bench_config(url, 1, 0.1, timeout_s=0.5, ttft_ms=100.0),
                                 replica_source=StaticReplicas([url] * 100))  # fmt: skip
        p = await prober.probe_region("r1")
        assert p.duration_ms / 1000 < prober.round_budget_s + 1.0
        assert 0 < len(p.replicas) < 100 and all(r.status == ProbeStatus.HEALTHY for r in p.replicas)
        assert (
            p.status == ProbeStatus.HEALTHY
            and f"{100 - len(p.replicas)} replicas not probed within 1.5s" in p.reason
        )
    finally:
        await runner.cleanup()
