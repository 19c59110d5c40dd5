"""drctl's chaos probes bounded as their docstrings promise (issue 28): the time each request and each
wait may take, one fresh connection per request with the fleet's token, the retries the boundary
allowed, and the monitor's query. Over httpx's in-memory transport and a fake clock: no server."""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from drctl.chaos import probes
from drctl.config.schema import FleetConfig, WorkloadAuth
from tests.support.config import tuned, write_config

Handler = Callable[[httpx.Request], httpx.Response]


class Wire:
    """Stands in for `httpx` inside drctl.chaos.probes: every client it builds is recorded and
    answered by `handler` in memory, through the transport the probe asked for."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.clients: list[dict[str, Any]] = []
        self.requests: list[httpx.Request] = []
        self.retries: list[Any] = []

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.handler(request)

    def HTTPTransport(self, **kw: Any) -> httpx.MockTransport:  # noqa: N802 - httpx's name
        self.retries.append(kw.get("retries"))
        return httpx.MockTransport(self._answer)

    def Client(self, **kw: Any) -> httpx.Client:  # noqa: N802 - httpx's name
        self.clients.append(dict(kw))
        # A client without the probe's transport would go to the network, and fail.
        transport = kw.pop("transport", None) if "limits" not in kw else httpx.MockTransport(self._answer)
        kw.pop("limits", None)
        return httpx.Client(transport=transport, **kw)


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Handler], Wire]]:
    def install(handler: Handler) -> Wire:
        fake = Wire(handler)
        monkeypatch.setattr(
            probes, "httpx", types.SimpleNamespace(Client=fake.Client, HTTPTransport=fake.HTTPTransport)
        )
        return fake

    yield install


class Clock:
    """time.monotonic reading `ticks` in turn (then the last one), and a sleep that only counts."""

    def __init__(self, *ticks: float) -> None:
        self.ticks = list(ticks)
        self.sleeps: list[float] = []
        self.reads = 0

    def monotonic(self) -> float:
        self.reads += 1
        assert self.reads <= 20, "the wait never ends"  # a wait that ignores within_s fails, not hangs
        return self.ticks.pop(0) if len(self.ticks) > 1 else self.ticks[0]

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)


def _served(region: str, header: str = "x-drctl-region") -> Handler:
    return lambda _: httpx.Response(200, json={"choices": [{"text": "x"}]}, headers={header: region})


def _failing(_: httpx.Request) -> httpx.Response:
    return httpx.Response(503)


ANON = {"global_endpoint": "http://global.test", "model": "m"}


def test_each_probe_request_is_bounded_and_on_a_fresh_connection(wire: Callable[[Handler], Wire]) -> None:
    net = wire(_served("us-east-1"))
    assert probes.global_success_ratio(requests=2, configuration=ANON) == 1.0
    assert probes.traffic_share("us-east-1", requests=1, configuration=ANON) == 1.0
    for client in net.clients:
        assert client["timeout"] == 5.0
        limits = client["limits"]
        assert (limits.max_connections, limits.max_keepalive_connections) == (1, 0)
    assert [str(r.url) for r in net.requests] == ["http://global.test/v1/completions"] * 3
    assert all("authorization" not in r.headers for r in net.requests)  # an anonymous endpoint


def test_probes_send_the_fleets_bearer_token(
    wire: Callable[[Handler], Wire], cfg: FleetConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRILL_TOKEN", "s3cret")
    with_auth = cfg.model_copy(
        update={
            "workload": cfg.workload.model_copy(
                update={"auth": WorkloadAuth.model_validate({"token_env": "DRILL_TOKEN"})}
            )
        }
    )
    net = wire(_served("us-east-1"))
    conf = {"fleet_config": str(write_config(with_auth, tmp_path)), "global_endpoint": "http://global.test"}
    assert probes.global_success_ratio(requests=1, configuration=conf) == 1.0
    assert net.requests[0].headers["authorization"] == "Bearer s3cret"


def test_the_fleets_region_header_and_model_are_read_from_its_config(
    wire: Callable[[Handler], Wire], cfg: FleetConfig, tmp_path: Path
) -> None:
    odd = tuned(cfg, "traffic", region_header="x-served-by")
    odd = odd.model_copy(update={"workload": odd.workload.model_copy(update={"model": "fleet-model"})})
    conf = {"fleet_config": str(write_config(odd, tmp_path)), "global_endpoint": "http://global.test"}
    net = wire(_served("us-east-1", "x-served-by"))
    assert probes.traffic_share("us-east-1", requests=1, configuration=conf) == 1.0
    assert b'"model":"fleet-model"' in net.requests[0].content.replace(b" ", b"")


def test_a_probe_without_fleet_config_or_model_is_refused() -> None:
    with pytest.raises(
        ValueError, match="^experiment configuration names neither 'fleet_config' nor 'model'$"
    ):
        probes.global_success_ratio(configuration={"global_endpoint": "http://global.test"})


def test_waits_end_at_within_s_and_report_the_seconds_to_the_millisecond(
    wire: Callable[[Handler], Wire], monkeypatch: pytest.MonkeyPatch
) -> None:
    net = wire(_failing)
    # started at 0, then 10 s per look at the clock: requests at 10 and 20, over at 30 (the default).
    clock = Clock(0, 10, 20, 30, 40, 50)
    monkeypatch.setattr(probes, "time", clock)
    with pytest.raises(
        TimeoutError, match=r"^the global endpoint did not serve 10 requests in a row within 30s$"
    ):
        probes.wait_for_served(configuration=ANON)
    assert len(net.requests) == 2 and clock.sleeps == [0.05, 0.05]
    assert [c["timeout"] for c in net.clients] == [2.0]
    monkeypatch.setattr(probes, "time", Clock(0, 10, 20, 30, 40, 50))
    with pytest.raises(
        TimeoutError, match=r"^traffic still reaches us-west-1, fails or is unattributed after 30s$"
    ):
        probes.wait_for_traffic_moved("us-west-1", configuration=ANON)
    assert len(net.requests) == 4 and [c["timeout"] for c in net.clients] == [2.0, 2.0]

    wire(_served("us-east-1"))
    monkeypatch.setattr(probes, "time", Clock(100.0, 100.0, 100.123456))
    assert probes.wait_for_served(consecutive=1, configuration=ANON) == {"served": True, "after_s": 0.123}
    monkeypatch.setattr(probes, "time", Clock(100.0, 100.0, 100.123456))
    assert probes.wait_for_traffic_moved("us-west-1", consecutive=1, configuration=ANON) == {
        "moved": True,
        "region": "us-west-1",
        "after_s": 0.123,
    }


def test_traffic_moved_reads_the_header_it_is_told(wire: Callable[[Handler], Wire]) -> None:
    wire(_served("us-east-1", "x-served-by"))
    moved = probes.wait_for_traffic_moved(
        "us-west-1", within_s=5, consecutive=2, header="x-served-by", configuration=ANON
    )
    assert moved["moved"] is True
    # Read from the default header, the same answers are unattributed: they prove nothing.
    with pytest.raises(TimeoutError):
        probes.wait_for_traffic_moved("us-west-1", within_s=0.2, consecutive=2, configuration=ANON)


def test_http_request_has_the_retries_and_timeout_the_boundary_allowed(
    wire: Callable[[Handler], Wire],
) -> None:
    net = wire(lambda _: httpx.Response(302, headers={"Location": "http://elsewhere.test/"}))
    assert probes.http_request("http://global.test/health")["status"] == 302
    assert net.retries == [0] and net.clients[0]["timeout"] == 5.0
    assert net.requests[0].method == "GET" and len(net.requests) == 1
    probes.http_request("http://global.test/health", method="HEAD", timeout=2.5, max_retries=3)
    assert net.retries == [0, 3] and net.clients[1]["timeout"] == 2.5
    assert [r.method for r in net.requests] == ["GET", "HEAD"]  # the redirect was answered, not followed


class _Handle:
    def __init__(self, status: Any) -> None:
        self.status = status
        self.queries: list[str] = []

    async def query(self, name: str) -> Any:
        self.queries.append(name)
        return self.status


class _Temporal:
    def __init__(self, status: Any) -> None:
        self.handle = _Handle(status)
        self.ids: list[str] = []

    def get_workflow_handle(self, workflow_id: str) -> _Handle:
        self.ids.append(workflow_id)
        return self.handle


def _monitor(monkeypatch: pytest.MonkeyPatch, status: Any) -> tuple[_Temporal, list[Any]]:
    from drctl.client import connection

    temporal = _Temporal(status)
    connected: list[Any] = []

    async def connect(cfg: FleetConfig) -> _Temporal:
        connected.append(cfg)
        return temporal

    monkeypatch.setattr(connection, "connect", connect)
    return temporal, connected


def test_the_monitors_status_is_queried_from_the_fleets_monitor(
    cfg: FleetConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    regions = {"us-west-1": {"state": "SUSPECT"}, "us-east-1": {"state": "HEALTHY"}}
    temporal, connected = _monitor(monkeypatch, {"regions": regions})
    conf = {"fleet_config": cfg.source_path}
    assert probes.monitor_status(conf) == {"regions": regions}
    assert temporal.ids == [f"monitor/{cfg.name}"] and temporal.handle.queries == ["status"]
    assert connected[0].name == cfg.name
    assert probes.region_state("us-west-1", conf) == "SUSPECT"
    with pytest.raises(LookupError, match=r"^the monitor reports no region 'eu-1'$"):
        probes.region_state("eu-1", conf)

    class Model:
        def model_dump(self, mode: str) -> dict[str, Any]:
            return {"regions": {"us-west-1": {"state": "RECOVERING", "mode": mode}}}

    _monitor(monkeypatch, Model())
    assert probes.monitor_status(conf) == {"regions": {"us-west-1": {"state": "RECOVERING", "mode": "json"}}}
    assert probes.region_state("us-west-1", conf) == "RECOVERING"
    _monitor(monkeypatch, {"regions": None})
    with pytest.raises(LookupError):
        probes.region_state("us-west-1", conf)


def test_the_monitors_query_is_bounded_at_15_seconds(
    cfg: FleetConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    _monitor(monkeypatch, {"regions": {}})
    bounds: list[float | None] = []
    real = asyncio.wait_for

    def wait_for(aw: Any, timeout: float | None) -> Any:
        bounds.append(timeout)
        return real(aw, timeout)

    monkeypatch.setattr(probes, "asyncio", types.SimpleNamespace(run=asyncio.run, wait_for=wait_for))
    assert probes.monitor_status({"fleet_config": cfg.source_path}) == {"regions": {}}
    assert bounds == [15]
