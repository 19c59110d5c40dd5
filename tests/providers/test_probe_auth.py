"""Bearer auth: a fleet of fleetsim servers in api-key mode (as `vllm serve --api-key`), probed by
InferenceProber with the token from the env var or file the config names.

fleetsim's api-key mode behaves as vLLM's middleware: /v1/* needs `Authorization: Bearer <key>`,
/health and /metrics stay open, and a refusal is a bare 401.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from drctl.chaos import probes
from drctl.config.schema import FleetConfig, RegionConfig
from drctl.devstack.fleetsim import FleetsimSettings, build_app
from drctl.models.health import ProbeStatus
from drctl.providers.probe import InferenceProber
from drctl.providers.replicas import ReplicaEndpoint
from drctl.providers.track_analysis import Completions, run_requests
from tests.support.config import one_region_config
from tests.support.http_stub import serve_app
from tests.support.ports import free_port
from tests.support.wait import assert_eventually

KEY = "sk-test-4f1d2c9e"
ENV = "DRCTL_TEST_VLLM_API_KEY"


class AuthedRegion:
    def __init__(self) -> None:
        self.urls: dict[str, str] = {}
        self.runners: list[web.AppRunner] = []

    async def replicas(self, _region: RegionConfig) -> list[ReplicaEndpoint]:
        """The replica source the prober is given: the two replicas (discovery is not under test here)."""
        return [ReplicaEndpoint(name=n, url=self.urls[n], track="stable") for n in ("r0", "r1")]

    async def serve(self, app: web.Application) -> str:
        runner, url = await serve_app(app)
        self.runners.append(runner)
        return url


@pytest.fixture(scope="module")
async def region() -> AsyncIterator[AuthedRegion]:
    r = AuthedRegion()
    for name in ("gateway", "r0", "r1"):
        r.urls[name] = await r.serve(
            build_app(FleetsimSettings(region="us-west-1", replica=name, api_key=KEY))
        )
    yield r
    for runner in r.runners:
        await runner.cleanup()


def _cfg(region: AuthedRegion, auth: str, gateway_url: str = "") -> FleetConfig:
    # Token files live in the test's tmp_path, under the temp dir the config allows for secrets.
    return one_region_config(
        "auth-test",
        gateway_url or region.urls["gateway"],
        '{api_url: "http://127.0.0.1:1", namespace: inference}',
        f"""
workload: {{model: fleetsim-tiny, {auth}}}
health: {{interval_s: 5, probe_timeout_s: 1.5, completion_sample: 1}}
""",
    )


async def test_fleetsim_api_key_mode_guards_v1_like_vllm(region: AuthedRegion) -> None:
    base = region.urls["r0"]
    async with httpx.AsyncClient(timeout=5) as http:
        for public in ("/health", "/metrics", "/ping", "/load", "/version"):  # vLLM leaves these open
            assert (await http.get(f"{base}{public}")).status_code == 200, public
        anon = await http.get(f"{base}/v1/models")
        assert anon.status_code == 401 and anon.json() == {"error": "Unauthorized"}
        wrong = await http.get(f"{base}/v1/models", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        body = {"model": "fleetsim-tiny", "prompt": "x", "max_tokens": 1}
        assert (await http.post(f"{base}/v1/completions", json=body)).status_code == 401
        ok = await http.post(f"{base}/v1/completions", json=body, headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200 and ok.json()["choices"]


async def test_authed_fleet_is_probed_healthy_with_the_env_token(
    region: AuthedRegion, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, KEY)
    p = await InferenceProber(
        _cfg(region, f"auth: {{token_env: {ENV}}}"), replica_source=region
    ).probe_region("us-west-1")
    assert p.status == ProbeStatus.HEALTHY, p.reason
    assert "2/2 replicas healthy" in p.reason
    assert all(t.models_ok and t.ttft_ms is not None for t in [p.gateway, *p.replicas])


async def test_authed_fleet_is_probed_healthy_with_a_token_file(region: AuthedRegion, tmp_path: Path) -> None:
    (tmp_path / "vllm-key").write_text(KEY + "\n")  # a mounted Secret usually ends with a newline
    p = await InferenceProber(
        _cfg(region, f"auth: {{token_file: {tmp_path / 'vllm-key'}}}"), replica_source=region
    ).probe_region("us-west-1")
    assert p.status == ProbeStatus.HEALTHY, p.reason


async def test_anonymous_or_wrong_token_is_auth_not_down(
    region: AuthedRegion, monkeypatch: pytest.MonkeyPatch
) -> None:
    anonymous = await InferenceProber(_cfg(region, ""), replica_source=region).probe_region("us-west-1")
    monkeypatch.setenv(ENV, "sk-wrong")
    wrong = await InferenceProber(
        _cfg(region, f"auth: {{token_env: {ENV}}}"), replica_source=region
    ).probe_region("us-west-1")
    for p in (anonymous, wrong):
        assert p.status == ProbeStatus.AUTH, p.reason
        assert all(t.status == ProbeStatus.AUTH and t.error_class == "auth" for t in [p.gateway, *p.replicas])
        assert "credentials refused" in p.reason and "HTTP 401" in p.reason
        assert "sk-wrong" not in p.model_dump_json()


async def test_unreadable_token_source_is_auth_naming_it(
    region: AuthedRegion, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    p = await InferenceProber(
        _cfg(region, f"auth: {{token_env: {ENV}}}"), replica_source=region
    ).probe_region("us-west-1")
    assert p.status == ProbeStatus.AUTH and f"environment variable {ENV} is unset" in p.reason
    missing = tmp_path / "absent"
    p = await InferenceProber(
        _cfg(region, f"auth: {{token_file: {missing}}}"), replica_source=region
    ).probe_region("us-west-1")
    assert p.status == ProbeStatus.AUTH and f"cannot read {missing}" in p.reason


async def test_a_dead_gateway_is_down_whatever_the_token(
    region: AuthedRegion, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "sk-wrong")
    dead = f"http://127.0.0.1:{free_port()}"
    p = await InferenceProber(
        _cfg(region, f"auth: {{token_env: {ENV}}}", gateway_url=dead), replica_source=region
    ).probe_region("us-west-1")
    assert p.status == ProbeStatus.DOWN and p.gateway.error_class == "connect", p.reason


def test_auth_config_needs_exactly_one_source() -> None:
    from drctl.config.schema import ConfigError

    base = AuthedRegion()
    base.urls["gateway"] = "http://127.0.0.1:1"
    for bad in ("auth: {}", f"auth: {{token_env: {ENV}, token_file: /x}}", "auth: {token_env: 'not a name'}"):
        with pytest.raises(ConfigError) as err:
            _cfg(base, bad)
        assert "workload.auth" in str(err.value)


def test_fleetsim_reads_the_key_from_vllms_variable() -> None:
    assert FleetsimSettings.from_env({"VLLM_API_KEY": KEY}).api_key == KEY
    assert FleetsimSettings.from_env({}).api_key is None


async def test_warmup_and_analysis_traffic_carries_the_token(region: AuthedRegion) -> None:
    urls = [region.urls["r0"], region.urls["r1"]]
    token = {"Authorization": f"Bearer {KEY}"}
    with_token = await run_requests(urls, Completions("fleetsim-tiny", 5.0, token), 4, 0.0)
    anonymous = await run_requests(urls, Completions("fleetsim-tiny", 5.0), 4, 0.0)
    assert all(t is not None for t in with_token) and anonymous == [None] * 4


async def test_drill_probes_send_the_token_from_the_fleet_config(
    region: AuthedRegion, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(f"""
name: auth-drill
regions:
  - {{name: us-west-1, weight: 1, gateway_url: "{region.urls["gateway"]}", kube: {{api_url: "http://127.0.0.1:1"}}}}
workload: {{model: fleetsim-tiny, auth: {{token_env: {ENV}}}}}
traffic:
  global_endpoint: {region.urls["gateway"]}
  global: {{kind: route53, hosted_zone_id: Z1, record_name: api.example.com, targets: {{us-west-1: a}}}}
  regional: {{kind: gateway-api}}
""")
    conf = {"fleet_config": str(path)}
    # In a thread: the probes are sync (Chaos Toolkit calls them so) and the servers share this loop.
    monkeypatch.setenv(ENV, KEY)
    assert await asyncio.to_thread(probes.global_success_ratio, requests=3, configuration=conf) == 1.0
    monkeypatch.setenv(ENV, "sk-wrong")
    assert await asyncio.to_thread(probes.global_success_ratio, requests=3, configuration=conf) == 0.0


class _Listed:
    """A replica source listing exactly these replicas."""

    def __init__(self, urls: dict[str, str]) -> None:
        self.urls = urls

    async def replicas(self, _region: RegionConfig) -> list[ReplicaEndpoint]:
        return [ReplicaEndpoint(name=n, url=u, track="stable") for n, u in self.urls.items()]


async def test_dead_engine_is_down_not_auth(region: AuthedRegion, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's /health answers 503 once the engine is dead: down, even though the token is right."""
    monkeypatch.setenv(ENV, KEY)
    async with httpx.AsyncClient(timeout=5) as http:
        (await http.post(f"{region.urls['r1']}/admin/fault", json={"down": True})).raise_for_status()
        try:
            assert (await http.get(f"{region.urls['r1']}/health")).status_code == 503
            p = await InferenceProber(
                _cfg(region, f"auth: {{token_env: {ENV}}}"), replica_source=region
            ).probe_region("us-west-1")
        finally:
            (await http.delete(f"{region.urls['r1']}/admin/fault")).raise_for_status()
    r0, r1 = sorted(p.replicas, key=lambda t: t.target)
    assert r0.status == ProbeStatus.HEALTHY, r0.error
    assert (r1.status, r1.error_class) == (ProbeStatus.DOWN, "http_5xx") and "HTTP 503" in (r1.error or "")
    assert p.status != ProbeStatus.AUTH


async def test_replica_loading_its_model_refuses_connections_then_serves(
    region: AuthedRegion, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As vLLM, fleetsim opens its port only once the model is loaded: until then the replica is
    not ready (connection refused, class "connect"), never an auth problem; then it is healthy."""
    monkeypatch.setenv(ENV, KEY)
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "drctl.devstack.fleetsim", "--port", str(port), "--api-key", KEY,
        env={**os.environ, "FLEETSIM_LOAD_S": "2", "FLEETSIM_REGION": "us-west-1"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        # The process runs and says it is loading: from here on, a refused connection is fleetsim's.
        line = await asyncio.wait_for(proc.stdout.readline(), 15)
        assert b"loading fleetsim-tiny for 2s" in line, line
        url = f"http://127.0.0.1:{port}"
        prober = InferenceProber(
            _cfg(region, f"auth: {{token_env: {ENV}}}"), replica_source=_Listed({"new": url})
        )
        (loading,) = (await prober.probe_region("us-west-1")).replicas
        assert (loading.status, loading.error_class) == (ProbeStatus.DOWN, "connect"), loading.error

        async def serving() -> bool:
            (probe,) = (await prober.probe_region("us-west-1")).replicas
            return probe.status == ProbeStatus.HEALTHY

        await assert_eventually(
            serving, timeout_s=20, interval_s=0.3, what="the loaded replica probed healthy"
        )
    finally:
        proc.kill()
        await proc.wait()
