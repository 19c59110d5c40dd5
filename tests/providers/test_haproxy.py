"""HAProxy traffic providers and runtime client against real HAProxy: Debian's 2.6 and a 3.2 build.

Topology (two HAProxy processes, as in the dev stack): the global frontend balances between a
region gateway (us-west-1, tracks stable/canary) and a plain backend standing in for us-east-1.
Every backend is a tiny HTTP server whose body names it, so the measured split is what a user of
the global endpoint would see.
"""

from __future__ import annotations

import collections
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from drctl.providers.haproxy import HAProxyGlobalTraffic, HAProxyRegionalTraffic
from drctl.providers.haproxy_runtime import HAProxyError, HAProxyRuntime
from tests.support.haproxy_binaries import binaries
from tests.support.http_stub import Reply, StubServer
from tests.support.ports import free_port
from tests.support.wait import wait_until

REQUESTS = 200

_DEFAULTS = """
defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
"""


def _proxy(sock: str, frontend: str, port: int, backend: str, rest: str) -> str:
    """An HAProxy config with a runtime socket and a round-robin frontend; `rest` goes on from its servers."""
    return f"""
global
    stats socket {sock} mode 600 level admin
{_DEFAULTS}
frontend {frontend}
    bind 127.0.0.1:{port}
    default_backend {backend}
backend {backend}
    balance roundrobin{rest}"""


def _backend_server(name: str) -> StubServer:
    reply = Reply(200, name.encode(), headers={"X-Served-By": name}, content_type=None)
    return StubServer(lambda _req: reply, port=free_port()).start()


class Stack:
    def __init__(self, tmp: Path, haproxy: str) -> None:
        self.backends = {n: _backend_server(n) for n in ("stable", "canary", "east")}
        slow = Reply(200, b"slow", headers={"X-Served-By": "slow"}, content_type=None, delay_s=1.0)
        self.backends["slow"] = StubServer(lambda _req: slow, port=free_port()).start()
        self.port = {n: s.port for n, s in self.backends.items()}
        self.global_port, self.gateway_port, self.pool_port = free_port(), free_port(), free_port()
        self.drain_port = free_port()
        self.dead_port = free_port()  # nothing listens here: a server that fails its health check
        self.global_sock, self.gateway_sock = str(tmp / "global.sock"), str(tmp / "us-west-1.sock")
        p = self.port
        global_cfg = _proxy(
            self.global_sock,
            "fe_global",
            self.global_port,
            "global",
            f"""
    server us-west-1 127.0.0.1:{self.gateway_port} weight 60
    server us-east-1 127.0.0.1:{p["east"]} weight 40
""",
        )
        gateway_cfg = _proxy(
            self.gateway_sock,
            "gateway",
            self.gateway_port,
            "region",
            f"""
    server stable 127.0.0.1:{p["stable"]} weight 100
    server canary 127.0.0.1:{p["canary"]} weight 0
frontend pool
    bind 127.0.0.1:{self.pool_port}
    default_backend track_stable
backend track_stable
    balance roundrobin
    option httpchk GET /health
    server seed 127.0.0.1:{p["stable"]}
frontend drain
    bind 127.0.0.1:{self.drain_port}
    default_backend track_drain
backend track_drain
    balance roundrobin
backend hashed
    balance source
    server a 127.0.0.1:{p["stable"]}
    server b 127.0.0.1:{p["canary"]}
""",
        )
        self.procs: list[subprocess.Popen[bytes]] = []
        for name, cfg in (("global", global_cfg), ("us-west-1", gateway_cfg)):
            path = tmp / f"{name}.cfg"
            path.write_text(cfg)
            log = (tmp / f"{name}.log").open("wb")
            self.procs.append(subprocess.Popen([haproxy, "-db", "-f", str(path)], stdout=log, stderr=log))
        self.global_rt, self.gateway_rt = HAProxyRuntime(self.global_sock), HAProxyRuntime(self.gateway_sock)
        try:
            wait_until(lambda: self._up(self.global_rt, "global"), timeout_s=10, what="global haproxy up")
            wait_until(lambda: self._up(self.gateway_rt, "region"), timeout_s=10, what="gateway haproxy up")
        except BaseException:
            self.close()  # the fixture never yields, so nothing else would stop the processes
            raise

    def _up(self, rt: HAProxyRuntime, backend: str) -> bool:
        for proc in self.procs:
            assert proc.poll() is None, f"haproxy exited with {proc.returncode}: {proc.args!r}"
        try:
            return bool(rt.servers(backend))
        except HAProxyError:  # the socket appears a moment after the process starts
            return False

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        for server in self.backends.values():
            server.close()


@pytest.fixture(scope="module", params=binaries())
def stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("haproxy"), request.param)
    yield s
    s.close()


@pytest.fixture(scope="module")
def global_traffic(stack: Stack) -> HAProxyGlobalTraffic:
    return HAProxyGlobalTraffic(stack.global_rt, "global", ["us-west-1", "us-east-1"])


@pytest.fixture(scope="module")
def regional(stack: Stack) -> HAProxyRegionalTraffic:
    return HAProxyRegionalTraffic({"us-west-1": stack.gateway_rt}, "region")


@pytest.fixture(autouse=True)
def reset_weights(stack: Stack) -> None:
    stack.global_rt.set_weights("global", {"us-west-1": 60, "us-east-1": 40})
    stack.gateway_rt.set_weights("region", {"stable": 100, "canary": 0})


def served_by(port: int, n: int = REQUESTS) -> collections.Counter[str]:
    """Send n requests (bounded, 2 s each) and count which backend answered each."""
    counts: collections.Counter[str] = collections.Counter()
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=2.0) as client:
        for _ in range(n):
            r = client.get("/")
            assert r.status_code == 200, r.text
            assert r.headers["X-Served-By"] == r.text
            counts[r.text] += 1
    return counts


def test_show_servers_state_is_parsed(stack: Stack) -> None:
    servers = {s.name: s for s in stack.global_rt.servers("global")}
    assert set(servers) == {"us-west-1", "us-east-1"}
    east = servers["us-east-1"]
    assert (east.address, east.port, east.weight, east.initial_weight) == (
        "127.0.0.1",
        stack.port["east"],
        40,
        40,
    )
    assert east.operational and not east.admin_maint and not east.draining


def test_global_weights_move_measured_traffic(stack: Stack, global_traffic: HAProxyGlobalTraffic) -> None:
    assert global_traffic.get_weights() == {"us-west-1": 60, "us-east-1": 40}
    counts = served_by(stack.global_port)
    # roundrobin is deterministic: sequential requests split exactly by weight, so the shares are
    # exact, and a tolerance would hide a weight that is off by a few points.
    assert counts == {"stable": 120, "east": 80}, counts

    global_traffic.set_weights({"us-west-1": 0, "us-east-1": 100})

    state = {s.name: s.weight for s in stack.global_rt.servers("global")}
    assert state == {"us-west-1": 0, "us-east-1": 100}
    assert global_traffic.get_weights() == state
    assert served_by(stack.global_port) == {"east": REQUESTS}


def test_regional_track_weights_move_measured_traffic(stack: Stack, regional: HAProxyRegionalTraffic) -> None:
    assert regional.get_track_weights("us-west-1") == {"stable": 100, "canary": 0}
    assert served_by(stack.gateway_port) == {"stable": REQUESTS}

    regional.set_track_weights("us-west-1", {"stable": 75, "canary": 25})

    assert stack.gateway_rt.get_weights("region") == {"stable": 75, "canary": 25}
    counts = served_by(stack.gateway_port)
    assert counts == {"stable": 150, "canary": 50}, counts
    # Through the global tier too: west's 60 % is split 75/25 by the gateway.
    counts = served_by(stack.global_port)
    assert counts == {"stable": 90, "canary": 30, "east": 80}, counts


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"us-west-1": 50, "eu-west-9": 50}, "eu-west-9"),
        ({"us-west-1": 257, "us-east-1": 1}, "us-west-1"),
        ({"us-west-1": 10, "us-east-1": -1}, "us-east-1"),
        ({"us-west-1": True, "us-east-1": 1}, "us-west-1"),
        ({"us-west-1": 0, "us-east-1": 0}, "all zero"),
        ({"us-east-1": 0, "us-west-1": 2.5}, "us-west-1"),
        ({}, "no region weights"),
    ],
)
def test_bad_global_weights_rejected_before_any_change(
    stack: Stack, global_traffic: HAProxyGlobalTraffic, weights: dict[str, int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        global_traffic.set_weights(weights)
    assert stack.global_rt.get_weights("global") == {"us-west-1": 60, "us-east-1": 40}


def test_partial_update_keeps_other_weights_and_cannot_zero_everything(
    stack: Stack, global_traffic: HAProxyGlobalTraffic, regional: HAProxyRegionalTraffic
) -> None:
    global_traffic.set_weights({"us-east-1": 0})
    assert global_traffic.get_weights() == {"us-west-1": 60, "us-east-1": 0}
    with pytest.raises(ValueError, match="all zero"):
        global_traffic.set_weights({"us-west-1": 0})
    with pytest.raises(ValueError, match="all zero"):
        regional.set_track_weights("us-west-1", {"stable": 0})
    assert global_traffic.get_weights() == {"us-west-1": 60, "us-east-1": 0}
    assert regional.get_track_weights("us-west-1") == {"stable": 100, "canary": 0}


def test_regional_rejects_unknown_region_track_and_missing_server(
    stack: Stack, regional: HAProxyRegionalTraffic
) -> None:
    with pytest.raises(ValueError, match="us-east-1"):
        regional.set_track_weights("us-east-1", {"stable": 1})
    with pytest.raises(ValueError, match="purple"):
        regional.set_track_weights("us-west-1", {"stable": 1, "purple": 1})
    # blue is a valid track, but this gateway has no server for it: HAProxy's state is wrong.
    with pytest.raises(HAProxyError, match="blue"):
        regional.set_track_weights("us-west-1", {"stable": 50, "blue": 50})
    assert stack.gateway_rt.get_weights("region") == {"stable": 100, "canary": 0}


def test_refused_weight_is_rolled_back(stack: Stack) -> None:
    # `balance source` is a static algorithm: HAProxy accepts weight 0 but refuses 50, so the
    # first command of the batch applies and the second fails; the client must undo the first.
    before = stack.gateway_rt.get_weights("hashed")
    with pytest.raises(HAProxyError, match="static LB algorithm"):
        stack.gateway_rt.set_weights("hashed", {"a": 0, "b": 50})
    assert stack.gateway_rt.get_weights("hashed") == before


def test_commands_batch_returns_each_reply_and_names_refusals(stack: Stack) -> None:
    rt = stack.global_rt
    replies = rt.commands(
        ["get weight global/us-west-1", "set weight global/us-west-1 7", "get weight global/us-west-1"]
    )
    assert replies == ["60 (initial 60)", "", "7 (initial 60)"]
    with pytest.raises(HAProxyError) as err:
        rt.commands(
            ["set weight global/us-west-1 8", "set weight global/nope 1", "get weight global/us-west-1"]
        )
    assert err.value.command == "set weight global/nope 1"
    assert err.value.reply == "No such server."
    assert rt.get_weights("global")["us-west-1"] == 8  # HAProxy has no transactions: earlier ones stick
    with pytest.raises(ValueError, match="single runtime API command"):
        rt.commands(["set weight global/us-west-1 1; set weight global/us-east-1 1"])


@pytest.mark.parametrize(("grace_s", "answers"), [(3.0, {200}), (0.0, {-1, 502})])
def test_del_server_lets_requests_in_flight_finish_within_the_grace(
    stack: Stack, grace_s: float, answers: set[int]
) -> None:
    rt = stack.gateway_rt
    rt.add_server("track_drain", "slow-1", "127.0.0.1", stack.port["slow"])
    got: list[int] = []

    def one() -> None:
        with httpx.Client(timeout=5.0) as client:
            try:
                got.append(client.get(f"http://127.0.0.1:{stack.drain_port}/").status_code)
            except httpx.HTTPError:
                got.append(-1)  # cut: HAProxy closed the client's connection

    request = threading.Thread(target=one)
    request.start()
    wait_until(
        lambda: any(s.name == "slow-1" for s in rt.servers("track_drain")) and _in_flight(rt, "slow-1") == 1,
        timeout_s=3,
        what="the request reaches the slow server",
    )
    rt.del_server("track_drain", "slow-1", grace_s=grace_s)
    request.join(timeout=5)
    assert len(got) == 1 and got[0] in answers  # served in full, or cut when there is no grace
    assert rt.servers("track_drain") == []


def _in_flight(rt: HAProxyRuntime, server: str) -> int:
    """The server's current sessions (scur) from `show stat`."""
    lines = rt.command("show stat").splitlines()
    header = lines[0].lstrip("# ").split(",")
    for line in lines[1:]:
        row = dict(zip(header, line.split(","), strict=False))
        if row.get("svname") == server:
            return int(row["scur"] or 0)
    return 0


def test_exact_errors(stack: Stack, tmp_path: Path) -> None:
    with pytest.raises(HAProxyError, match="Can't find backend"):
        stack.global_rt.servers("nope")
    with pytest.raises(HAProxyError, match="Unknown command"):
        stack.global_rt.command("frobnicate all")
    with pytest.raises(HAProxyError, match="has no server for region"):
        HAProxyGlobalTraffic(stack.global_rt, "global", ["us-west-1", "ap-south-1"]).get_weights()
    with pytest.raises(HAProxyError, match="unreachable"):
        HAProxyRuntime(str(tmp_path / "missing.sock")).servers("global")


def test_dynamic_servers_with_health_checks(stack: Stack) -> None:
    rt = stack.gateway_rt
    rt.add_server("track_stable", "llm-stable-1", "127.0.0.1", stack.port["canary"], inter_ms=100, fall=1)
    rt.add_server("track_stable", "llm-stable-2", "127.0.0.1", stack.dead_port, inter_ms=100, fall=1)

    def states() -> dict[str, tuple[bool, str]]:
        return {s.name: (s.operational, s.check_result) for s in rt.servers("track_stable")}

    wait_until(
        lambda: (
            states().get("llm-stable-1") == (True, "passed")
            and states().get("llm-stable-2") == (False, "failed")
        ),
        timeout_s=10,
        what="health checks settle",
    )
    # Requests reach the new server; the failing one gets none.
    assert set(served_by(stack.pool_port, 40)) == {"stable", "canary"}
    with pytest.raises(HAProxyError, match="Already exists"):
        rt.add_server("track_stable", "llm-stable-1", "127.0.0.1", stack.port["canary"])

    rt.del_server("track_stable", "llm-stable-1")
    rt.del_server("track_stable", "llm-stable-2")
    assert set(states()) == {"seed"}
    assert served_by(stack.pool_port, 40) == {"stable": 40}
    with pytest.raises(HAProxyError, match="No such server"):
        rt.del_server("track_stable", "llm-stable-1")
    rt.del_server("track_stable", "llm-stable-1", missing_ok=True)


def test_data_plane_out_names_regions_whose_server_failed_its_checks_or_is_in_maintenance(
    stack: Stack,
) -> None:
    """What the tier watch reads: a region's server that HAProxy's own checks took down, as real
    HAProxy 3.2 reports it; a weight of 0 is drctl's, never 'out'."""
    rt = stack.gateway_rt
    rt.add_server("track_stable", "us-west-1", "127.0.0.1", stack.dead_port, inter_ms=100, fall=1)
    rt.add_server("track_stable", "us-east-1", "127.0.0.1", stack.port["canary"], inter_ms=100, fall=1)
    tier = HAProxyGlobalTraffic(rt, "track_stable", ["us-west-1", "us-east-1"])
    try:
        wait_until(lambda: set(tier.data_plane_out()) == {"us-west-1"}, timeout_s=10, what="check fails")
        assert "health checks failed" in tier.data_plane_out()["us-west-1"]
        rt.set_weight("track_stable", "us-east-1", 0)
        assert set(tier.data_plane_out()) == {"us-west-1"}
        rt.command("set server track_stable/us-east-1 state maint")
        out = tier.data_plane_out()
        assert set(out) == {"us-west-1", "us-east-1"} and out["us-east-1"].startswith("in maintenance")
    finally:
        rt.del_server("track_stable", "us-west-1", missing_ok=True)
        rt.del_server("track_stable", "us-east-1", missing_ok=True)
