"""Passive-signal readers against real components: HAProxy 2.6 `show stat`, fleetsim /metrics, Prometheus.

The processes (tests/support/passive_env.py) are shared by the module. Traffic is real HTTP;
errors come from fleetsim's injected error fault and from a gateway server on a closed port.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from drctl.config.schema import FleetConfig, RegionConfig
from drctl.models.passive import PassiveSignal, PassiveVerdict
from drctl.models.passive_window import SignalWindow
from drctl.providers import prom as exposition
from drctl.providers.gateway_stats import gateway_snapshots
from drctl.providers.haproxy_runtime import HAProxyError, HAProxyRuntime
from drctl.providers.passive import PassiveReader
from drctl.providers.prom_query import PrometheusQueryError, PrometheusSignals
from drctl.providers.replicas import ReplicaEndpoint
from drctl.providers.vllm_metrics import ReplicaTarget, read_replicas
from tests.support.config import fleet_config_data
from tests.support.haproxy_binaries import REPO
from tests.support.passive_env import MODEL, SURFACE, TH, TTFT_MS, Env, complete, fault, running
from tests.support.ports import free_port
from tests.support.wait import wait_until


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with running(tmp_path_factory.mktemp("passive")) as e:
        yield e


def test_gateway_show_stat_counts_requests_5xx_and_connect_errors(env: Env) -> None:
    window = SignalWindow(TH)
    for s in gateway_snapshots(env.runtime, "us-west-1", ["region", "broken"]):
        window.add(s)
    before = {s.source: s for s in gateway_snapshots(env.runtime, "us-west-1", ["region", "broken"])}
    fault(env.west, error_rate=0.5)
    try:
        with httpx.Client(timeout=5, trust_env=False) as c:
            codes = complete(c, env.gateway, 40) + complete(c, env.broken, 4)
    finally:
        fault(env.west)
    assert codes[:40].count(500) == 20 and codes[40:] == [503] * 4, codes
    after = gateway_snapshots(env.runtime, "us-west-1", ["region", "broken"])
    by = {s.source: s for s in after}
    region, broken = by["gateway:region"], by["gateway:broken"]
    d = before["gateway:region"]
    assert (region.requests_total - d.requests_total, region.errors_total - d.errors_total) == (40, 20)
    assert region.response_time_avg_ms is not None and region.response_time_avg_ms < TH.max_ttft_p99_ms
    b = before["gateway:broken"]
    # A refused connection is answered 503 by HAProxy: counted once as a 5xx, and in econ.
    assert broken.errors_total - b.errors_total == 4
    assert (broken.connect_errors_total or 0) - (b.connect_errors_total or 0) == 4
    for s in after:
        window.add(s)
    verdict = window.verdict("us-west-1", now=after[0].taken_at)
    assert verdict.signal is PassiveSignal.SUSPECT, verdict.reason
    gw = verdict.views[0]
    assert gw.kind == "gateway" and gw.errors == 24 and gw.connect_errors == 4
    assert "4 failed connects" in verdict.reason, verdict.reason


def test_slow_sse_streams_show_in_the_gateway_response_time_and_the_ttft_histogram(env: Env) -> None:
    th = TH.model_copy(update={"max_ttft_p99_ms": 200, "min_requests": 5})
    window = SignalWindow(th)
    target = [ReplicaTarget("us-west-1", "west-0", env.west)]

    async def replica() -> list:
        async with httpx.AsyncClient(trust_env=False) as client:
            return (await read_replicas(client, target, timeout_s=1.0))[0]

    def stream(_: int) -> float:
        body = {"model": MODEL, "prompt": "hi", "max_tokens": 3, "stream": True}
        with (
            httpx.Client(timeout=5, trust_env=False) as c,
            c.stream("POST", f"{env.sse}/v1/completions", json=body) as r,
        ):
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            return len(r.read())

    for s in [*gateway_snapshots(env.runtime, "us-west-1", ["sse"]), *asyncio.run(replica())]:
        window.add(s)
    fault(env.west, added_latency_ms=300)
    try:
        with ThreadPoolExecutor(8) as pool:
            assert all(list(pool.map(stream, range(8))))
    finally:
        fault(env.west)
    for s in [*gateway_snapshots(env.runtime, "us-west-1", ["sse"]), *asyncio.run(replica())]:
        window.add(s)
    gw, rep = window.verdict("us-west-1", now=time.monotonic()).views
    # fleetsim sends its headers with the first token, so HAProxy's mean time to response
    # headers is the streams' TTFT; the replica's histogram sees the same 300+ ms.
    assert gw.response_time_avg_ms is not None and gw.response_time_avg_ms >= 300, gw
    assert rep.ttft_p50_ms is not None and rep.ttft_p50_ms >= 300, rep
    v = window.verdict("us-west-1", now=time.monotonic())
    assert v.signal is PassiveSignal.SUSPECT
    # 8 requests are far from the 1024 HAProxy's rtime averages over: only the histogram breaches.
    assert "gateway mean response time" not in v.reason and "replica TTFT p99" in v.reason, v.reason


def test_gateway_reader_names_a_missing_backend_and_a_dead_socket(env: Env, tmp_path: Path) -> None:
    with pytest.raises(HAProxyError, match="has no backend nosuch"):
        gateway_snapshots(env.runtime, "us-west-1", ["region", "nosuch"])
    with pytest.raises(HAProxyError, match="unreachable"):
        gateway_snapshots(HAProxyRuntime(str(tmp_path / "none.sock"), timeout_s=0.5), "us-west-1", ["region"])


def test_replica_metrics_give_errors_and_ttft_and_a_dead_replica_goes_missing(env: Env) -> None:
    targets = [
        ReplicaTarget("us-east-1", "east-0", env.east),
        ReplicaTarget("us-east-1", "east-dead", f"http://127.0.0.1:{free_port()}"),
    ]

    async def read() -> tuple[list, dict[str, str]]:
        async with httpx.AsyncClient(trust_env=False) as client:
            return await read_replicas(client, targets, timeout_s=1.0)

    window = SignalWindow(TH)
    snaps, errors = asyncio.run(read())
    assert [s.source for s in snaps] == ["east-0"] and "ConnectError" in errors["east-dead"]
    window.add(snaps[0])
    first = snaps[0]
    fault(env.east, error_rate=0.5)
    try:
        with httpx.Client(timeout=5, trust_env=False) as c:
            codes = complete(c, env.east, 30)
    finally:
        fault(env.east)
    snaps, _ = asyncio.run(read())
    (now,) = snaps
    assert (now.requests_total - first.requests_total, now.errors_total - first.errors_total) == (30, 15), (
        codes
    )
    assert now.ttft is not None and first.ttft is not None and now.e2e is not None
    assert now.ttft.count - first.ttft.count == 15  # only the answered requests have a first token
    window.add(now)
    v = window.verdict("us-east-1", now=now.taken_at)
    assert v.signal is PassiveSignal.SUSPECT and "replica error rate 50%" in v.reason, v.reason
    (rv,) = v.views
    # fleetsim's TTFT is 20 ms plus scheduling: within vLLM's (0.02, 0.04] bucket or the next.
    assert rv.ttft_p50_ms is not None and TTFT_MS <= rv.ttft_p50_ms <= 60
    # No newer read within max_age_s: missing, not healthy.
    late = window.verdict("us-east-1", now=now.taken_at + TH.max_age_s + 0.1)
    assert late.signal is PassiveSignal.MISSING and late.missing == ["east-0"]


def _load(base: str, stop: threading.Event, deadline_s: float) -> None:
    end = time.monotonic() + deadline_s
    with httpx.Client(timeout=5, trust_env=False) as c:
        while not stop.is_set() and time.monotonic() < end:
            complete(c, base, 1)


def test_prometheus_queries_judge_each_region(env: Env) -> None:
    prom = PrometheusSignals(env.prometheus, timeout_s=2)
    stop = threading.Event()
    loads = [threading.Thread(target=_load, args=(u, stop, 15), daemon=True) for u in (env.east, env.west)]
    fault(env.east, error_rate=0.5)
    try:
        for t in loads:
            t.start()

        def judged() -> dict[str, PassiveSignal] | None:
            got = {v.region: v for v in prom.verdicts(["us-east-1", "us-west-1", "eu-west-1"], TH)}
            ok = (
                got["us-east-1"].signal is PassiveSignal.SUSPECT
                and got["us-west-1"].signal is PassiveSignal.OK
            )
            return {r: v.signal for r, v in got.items()} if ok else None

        signals = wait_until(judged, timeout_s=10, interval_s=0.25, what="prometheus verdicts")
    finally:
        stop.set()
        fault(env.east)
        for t in loads:
            t.join(timeout=10)
    assert signals["eu-west-1"] is PassiveSignal.MISSING
    west = next(v for v in prom.verdicts(["us-west-1"], TH))
    assert west.views and west.views[0].ttft_p99_ms is not None and west.views[0].ttft_p99_ms < 200
    prom.close()


def test_prometheus_errors_are_named(env: Env) -> None:
    prom = PrometheusSignals(env.prometheus, timeout_s=2)
    with pytest.raises(PrometheusQueryError, match="bad_data"):
        prom.query("sum(")
    prom.close()
    dead = PrometheusSignals(f"http://127.0.0.1:{free_port()}", timeout_s=0.5)
    with pytest.raises(PrometheusQueryError, match="unreachable"):
        dead.query("up")
    dead.close()


class _Listing:
    """The platform's answer to "which replicas", changed by the test (the platform owns them)."""

    def __init__(self, endpoints: dict[str, list[ReplicaEndpoint]]) -> None:
        self.endpoints = endpoints
        self.fail: str | None = None

    async def replicas(self, region: RegionConfig) -> list[ReplicaEndpoint]:
        if self.fail:
            raise RuntimeError(self.fail)
        return self.endpoints.get(region.name, [])


def _fleet(env: Env, source: str = "direct", prometheus: str | None = None) -> FleetConfig:
    data = fleet_config_data()
    data["regions"][0]["gateway_runtime_socket"] = env.runtime.socket_path
    data["regions"][1]["gateway_runtime_socket"] = "/nonexistent/gw.sock"
    data["health"] = {
        "passive": {
            "window_s": 3,
            "max_age_s": 2,
            "min_requests": 5,
            "source": source,
            "prometheus": {"url": prometheus or env.prometheus, "timeout_s": 0.5},
        }
    }
    return FleetConfig.model_validate(data)


def test_passive_reader_reports_why_reads_fail_and_forgets_removed_replicas(env: Env) -> None:
    listing = _Listing({"us-east-1": [ReplicaEndpoint(name="east-0", url=env.east)]})

    async def run() -> None:
        reader = PassiveReader(_fleet(env), listing, replicas_refresh_s=0)
        try:
            west, east = await reader.read()
            # us-west-1: its gateway was read (no replica listed); us-east-1: its socket is gone.
            assert west.signal is PassiveSignal.NO_SIGNAL and [v.kind for v in west.views] == ["gateway"]
            assert "unreachable" in reader.read_errors["us-east-1/gateway"]
            assert [v.kind for v in east.views] == ["replica"]
            listing.fail = "API server down"
            await reader.read()
            # The last list is kept, and the failure named.
            assert "API server down" in reader.read_errors["us-east-1/replicas"]
            assert "us-east-1/east-0" not in reader.read_errors
            listing.fail, listing.endpoints = None, {}
            _, east = await reader.read()
            assert east.signal is PassiveSignal.MISSING and east.missing == [], east.reason
        finally:
            await reader.aclose()

    asyncio.run(run())


def test_passive_reader_with_prometheus_source(env: Env) -> None:
    async def run() -> list[PassiveVerdict]:
        reader = PassiveReader(_fleet(env, "prometheus"), _Listing({}))
        try:
            return await reader.read()
        finally:
            await reader.aclose()

    # Prometheus scrapes both replicas every 250 ms, so both regions soon have fresh series (whatever
    # the last load left); this test may be the module's first to ask, before the first scrapes.
    west, east = wait_until(
        lambda: (v := asyncio.run(run())) and PassiveSignal.MISSING not in (v[0].signal, v[1].signal) and v,
        15,
        0.5,
        what="fresh vLLM series in Prometheus",
    )
    assert west.views[0].kind == east.views[0].kind == "prometheus"
    reader = PassiveReader(_fleet(env, "prometheus", f"http://127.0.0.1:{free_port()}"), _Listing({}))
    verdicts = asyncio.run(reader.read())
    assert [v.signal for v in verdicts] == [
        PassiveSignal.MISSING
    ] * 2 and "unreachable" in reader.read_errors["prometheus"]
    asyncio.run(reader.aclose())


def test_each_replica_exposes_one_vllm_surface_and_the_prober_reads_either(env: Env) -> None:
    for region, base in (("us-west-1", env.west), ("us-east-1", env.east)):
        text = httpx.get(f"{base}/metrics", timeout=2, trust_env=False).text
        names = {n for n, _, _ in exposition.parse_series(text)}
        engines = {
            labels.get("engine") for n, labels, _ in exposition.parse_series(text) if n.startswith("vllm:")
        }
        if SURFACE[region] == "v1":
            assert exposition.VLLM_KV_CACHE in names and exposition.VLLM_KV_CACHE_V0 not in names
            assert engines == {"0"}  # every vllm: series carries model_name and engine
        else:
            assert exposition.VLLM_KV_CACHE_V0 in names and exposition.VLLM_KV_CACHE not in names
            assert engines == {None}
        gauges = exposition.vllm_gauges(text)
        assert 0 <= gauges[exposition.VLLM_KV_CACHE] <= 1 and gauges[exposition.VLLM_WAITING] == 0, (
            region,
            gauges,
        )


def _dashboard_vllm_queries() -> list[str]:
    doc = json.loads((REPO / "deploy" / "grafana" / "drctl.json").read_text())
    exprs = [t["expr"] for panel in doc["panels"] for t in panel.get("targets", []) if "expr" in t]
    return [e for e in exprs if "vllm:" in e]


def test_dashboard_vllm_queries_answer_for_both_surfaces(env: Env) -> None:
    """The dashboard's vLLM panels, run against Prometheus scraping a V0 and a V1 replica."""
    queries = _dashboard_vllm_queries()
    assert queries, "the dashboard has no vLLM panel left to check"
    with httpx.Client(timeout=5, trust_env=False) as c:
        for base in (env.west, env.east):
            complete(c, base, 5)

        def answered(expr: str) -> set[str] | None:
            # Grafana's $__rate_interval is at least four scrape intervals: 250 ms here.
            promql = expr.replace("$__rate_interval", "5s").replace("$fleet", "")
            resp = c.get(f"{env.prometheus}/api/v1/query", params={"query": promql}).json()
            assert resp["status"] == "success", (promql, resp)
            regions = {
                r["metric"].get("region", "") for r in resp["data"]["result"] if r["value"][1] != "NaN"
            }
            return regions if regions >= set(SURFACE) else None

        for expr in queries:
            wait_until(
                lambda e=expr: answered(e), timeout_s=15, interval_s=0.25, what=f"both surfaces in {expr}"
            )


def test_v0_replica_errors_are_unknown_never_zero(env: Env) -> None:
    """us-west-1's replica shows vLLM v0.6.3's surface: no http_requests_total, so the failed half
    of its answers shows nowhere. Its errors read as unknown (None), never as 0, and the replica
    view has no error rate rather than 0% (issue 27 item 9)."""
    targets = [ReplicaTarget("us-west-1", "west-0", env.west)]

    async def read() -> list:
        async with httpx.AsyncClient(trust_env=False) as client:
            return (await read_replicas(client, targets, timeout_s=2.0))[0]

    window = SignalWindow(TH)
    (first,) = asyncio.run(read())
    window.add(first)
    fault(env.west, error_rate=0.5)
    try:
        with httpx.Client(timeout=5, trust_env=False) as c:
            codes = complete(c, env.west, 30)
    finally:
        fault(env.west)
    assert 500 in codes and 200 in codes, codes
    (now,) = asyncio.run(read())
    assert first.errors_total is None and now.errors_total is None
    assert now.requests_total - first.requests_total == codes.count(200)  # the successes: all it knows
    window.add(now)
    (view,) = window.verdict("us-west-1", now=now.taken_at).views
    assert view.kind == "replica" and view.errors is None and view.error_rate is None, view


def test_passive_reader_skips_replicas_still_loading(env: Env) -> None:
    """A replica its EndpointSlice lists as not ready is loading its model with its port closed
    (as vLLM): it has no metrics to read yet, and that is no read error (issue 27 item 6)."""
    loading = ReplicaEndpoint(name="east-new", url=f"http://127.0.0.1:{free_port()}", ready=False)
    listing = _Listing({"us-east-1": [ReplicaEndpoint(name="east-0", url=env.east), loading]})

    async def run() -> None:
        reader = PassiveReader(_fleet(env), listing, replicas_refresh_s=0)
        try:
            await reader.read()
            assert "us-east-1/east-new" not in reader.read_errors, reader.read_errors
            assert "us-east-1/east-0" not in reader.read_errors, reader.read_errors
        finally:
            await reader.aclose()

    asyncio.run(run())
