"""The global tier's data plane, on by default, rendered by `drctl dev up` and run by a real HAProxy 2.6.

The fast path: us-west-1 (weight 60) is broken in each of the ways it covers: nothing listening
on its gateway (the region is hard down), or a gateway that answers 503 (no replica left behind
it). us-east-1 (weight 40) is a plain server. Without the fast path (and without health checks,
to measure it alone), users see the broken region's share as errors until drctl moves the
weights; with it, every request is answered by us-east-1.

The health checks: real regions, no Temporal and no worker at all; a region whose replicas die
leaves the rotation by the global tier's checks alone.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from drctl.config.schema import FleetConfig, HAProxyGlobal, load_config
from drctl.devstack import haproxy_conf, processes, stack
from drctl.devstack.haproxy_conf import READY_PATH, global_socket, render_global
from drctl.devstack.restart import restart_global_gateway
from drctl.providers.haproxy_runtime import HAProxyRuntime
from drctl.providers.traffic_factory import global_traffic
from tests.support.config import short_tmp_dir, write_fleet_config
from tests.support.http_stub import Reply, StubServer
from tests.support.ports import free_port
from tests.support.regionproc import RegionProcess
from tests.support.wait import wait_until

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
REQUESTS = 40


def _server(status: int, name: str) -> StubServer:
    return StubServer(lambda _req: Reply(status, name.encode(), content_type=None), port=free_port()).start()


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, StubServer]]:
    """us-east-1 answering, and a us-west-1 gateway with no replica left behind it (503)."""
    running = {"east": _server(200, "us-east-1"), "west_503": _server(503, "us-west-1 has no replica")}
    yield running
    for server in running.values():
        server.close()


def _global(fast_path: bool, west_url: str, east_url: str) -> Iterator[str]:
    """A global HAProxy from the dev stack's own renderer, fast path on or off and no health
    checks (the fast path alone); yields its endpoint URL."""
    path = write_fleet_config(
        overrides={"traffic": {"global": {"fast_path": fast_path, "health_checks": False}}}, data_plane=True
    )
    cfg = load_config(path)
    regions = [
        r.model_copy(update={"gateway_url": url})
        for r, url in zip(cfg.regions, (west_url, east_url), strict=True)
    ]
    cfg = cfg.model_copy(update={"regions": regions})
    Path(global_socket(cfg)).parent.mkdir(parents=True, exist_ok=True)
    conf = path.parent / "global.cfg"
    conf.write_text(render_global(cfg))
    proc = subprocess.Popen(
        [HAPROXY, "-db", "-f", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_until(
            lambda: Path(global_socket(cfg)).exists() or proc.poll() is not None, 10, what="HAProxy up"
        )
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        yield cfg.traffic.global_endpoint
    finally:
        proc.terminate()
        proc.wait(5)
        shutil.rmtree(path.parent, ignore_errors=True)


def _answers(url: str) -> list[tuple[int, str]]:
    """REQUESTS completions at once (HAProxy spends ~1 s per connect retry to a dead server)."""
    with httpx.Client(timeout=10.0, limits=httpx.Limits(max_connections=REQUESTS)) as client:

        def one(_: int) -> tuple[int, str]:
            r = client.post(f"{url}/v1/completions", json={"model": "m", "prompt": "hi", "max_tokens": 1})
            return r.status_code, r.text

        with ThreadPoolExecutor(REQUESTS) as pool:
            return list(pool.map(one, range(REQUESTS)))


def _tier(cfg: FleetConfig, **fields: object) -> FleetConfig:
    tier = cfg.traffic.global_tier.model_copy(update=fields)
    return cfg.model_copy(update={"traffic": cfg.traffic.model_copy(update={"global_tier": tier})})


def test_fast_path_and_health_checks_are_on_by_default_and_can_be_turned_off() -> None:
    path = write_fleet_config(data_plane=True)
    try:
        cfg = load_config(path)
        text = render_global(cfg)
        assert "retry-on conn-failure empty-response 503" in text and "option redispatch 1" in text
        assert f"option httpchk GET {READY_PATH}" in text
        for r in cfg.regions:
            assert f"weight {r.weight} check inter 2000ms fall 3 rise 2" in text
        off = render_global(_tier(cfg, fast_path=False, health_checks=False))
        assert "retry-on" not in off and "redispatch" not in off and " check" not in off
        tuned = render_global(_tier(cfg, check_interval_s=0.5, check_fall=2, check_rise=1))
        assert "check inter 500ms fall 2 rise 1" in tuned
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)


@pytest.mark.parametrize("broken", ["down", "503"])
def test_a_broken_region_costs_users_errors_without_the_fast_path_and_none_with_it(
    broken: str, servers: dict[str, StubServer]
) -> None:
    east_url = f"http://127.0.0.1:{servers['east'].port}"
    west_port = free_port() if broken == "down" else servers["west_503"].port
    west_url = f"http://127.0.0.1:{west_port}"
    for fast_path in (False, True):
        for url in _global(fast_path, west_url, east_url):
            answers = _answers(url)
            bad = [a for a in answers if a[0] != 200]
            if fast_path:
                assert bad == [] and {text for _, text in answers} == {"us-east-1"}
            else:
                # Round robin at 60/40 sends 24 of every 40 requests to the broken region.
                assert len(bad) == REQUESTS * 60 // 100, bad[:3]


def test_compose_global_config_ships_the_same_lines() -> None:
    """deploy/compose/haproxy-global.cfg has the fast path, the checks and the state file on, line
    for line as the dev stack renders them with the defaults."""
    path = write_fleet_config(data_plane=True)
    try:
        rendered = [ln.strip() for ln in render_global(load_config(path)).splitlines()]
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)
    compose = (Path(__file__).resolve().parents[2] / "deploy/compose/haproxy-global.cfg").read_text()
    shipped = {ln.strip() for ln in compose.splitlines()}
    lines = [
        ln
        for ln in rendered
        if ln.startswith(
            (
                "retries",
                "option redispatch",
                "retry-on",
                "option http-buffer",
                "option httpchk",
                "http-check",
                "load-server-state",
            )
        )
    ]
    assert len(lines) == 7
    for ln in lines:
        assert ln in shipped, ln
    for listing in (rendered, shipped):
        servers = [ln for ln in listing if ln.startswith("server ")]
        assert len(servers) == 2 and all(ln.endswith("check inter 2000ms fall 3 rise 2") for ln in servers)


def test_the_global_gateway_restarts_on_its_re_rendered_config_and_keeps_the_shifted_weights() -> None:
    """What bench/rto.py's policies do between trials, and an operator's restart mid-failover: the
    dev stack's global HAProxy component restarted on its re-rendered config (fast path off, then
    on) after a failover's shift set the weights (the same provider call). The shifted weights
    survive both restarts through the server-state file; before, each restart went back to the
    configured 60/40. (Its own state dir, not the session stack, whose recorded pids other tests
    compare.)"""
    path = write_fleet_config(data_plane=True)
    on = load_config(path)
    off = _tier(on, fast_path=False)
    shifted = {"us-west-1": 0, "us-east-1": 100}
    assert on.weights != shifted
    glob = stack.state_dir(on) / "haproxy" / "global.cfg"
    glob.parent.mkdir(parents=True, exist_ok=True)
    haproxy_conf.fresh_state_file(haproxy_conf.state_file(on, "global"))  # what `drctl dev up` does
    try:
        first = restart_global_gateway(on, path)
        assert "retry-on conn-failure empty-response 503" in glob.read_text()
        assert global_traffic(on).get_weights() == on.weights
        global_traffic(on).set_weights(shifted)  # the failover's shift
        second = restart_global_gateway(off, path)
        assert second != first and "retry-on" not in glob.read_text()
        assert not processes.pid_alive(first) and processes.pid_alive(second)
        assert global_traffic(off).get_weights() == shifted
        third = restart_global_gateway(on, path)
        assert processes.pid_alive(third) and global_traffic(on).get_weights() == shifted
    finally:
        stack.down(on)
        shutil.rmtree(path.parent, ignore_errors=True)


def _served_by(client: httpx.Client, cfg: FleetConfig) -> str:
    """One user request through the global endpoint: the region that served it, or the error."""
    body = {"model": cfg.workload.model, "prompt": "hi", "max_tokens": 1}
    try:
        r = client.post(f"{cfg.traffic.global_endpoint}/v1/completions", json=body)
    except httpx.HTTPError as exc:
        return type(exc).__name__
    return r.headers.get(cfg.traffic.region_header, "?") if r.status_code == 200 else str(r.status_code)


def test_a_region_whose_replicas_die_leaves_the_rotation_by_the_checks_alone() -> None:
    """No Temporal, no worker, no drctl: two real regions behind the rendered global tier, its
    health checks on and the fast path off (so the checks alone must do it). us-west-1's replicas
    are killed and stay down: within interval x fall (plus the replicas' own checks and slack)
    every user is served by us-east-1, while us-west-1 keeps the weight drctl gave it; once its
    replicas are back, it rejoins after rise checks. (Before, the global tier had no checks: the
    dead region's share failed until drctl moved the weights.)"""
    directory = short_tmp_dir()
    path = write_fleet_config(
        directory, overrides={"traffic": {"global": {"fast_path": False}}}, data_plane=True
    )
    cfg = load_config(path)
    tier = cfg.traffic.global_tier
    assert isinstance(tier, HAProxyGlobal) and tier.health_checks
    haproxy_conf.haproxy_dir(cfg).mkdir(parents=True, exist_ok=True)
    haproxy_conf.fresh_state_file(haproxy_conf.state_file(cfg, "global"))
    conf = haproxy_conf.haproxy_dir(cfg) / "global.cfg"
    conf.write_text(render_global(cfg))
    try:
        with (
            RegionProcess(path, "us-west-1") as west,
            RegionProcess(path, "us-east-1"),
            httpx.Client(timeout=5.0) as client,
        ):
            proc = subprocess.Popen([HAPROXY, "-db", "-f", str(conf)], stdout=subprocess.DEVNULL)
            try:
                runtime = HAProxyRuntime(global_socket(cfg))
                # Both regions serve (and pass their checks) before the fault.
                wait_until(
                    lambda: {_served_by(client, cfg) for _ in range(10)} == {"us-west-1", "us-east-1"},
                    timeout_s=20,
                    what="both regions serving",
                )
                west.admin.post(
                    "/faults/replicas",
                    json={"action": "kill", "track": "stable", "count": 2, "stay_down": True},
                ).raise_for_status()
                # Bounded: one request per 0.2 s, until 20 in a row come from us-east-1.
                streak: list[str] = []

                def all_east() -> bool:
                    streak.append(_served_by(client, cfg))
                    del streak[:-20]
                    return streak == ["us-east-1"] * 20

                wait_until(all_east, timeout_s=tier.detect_s + 20, interval_s=0.2, what="users on us-east-1")
                west_state = {s.name: s for s in runtime.servers(haproxy_conf.global_backend(cfg))}[
                    "us-west-1"
                ]
                assert not west_state.operational and west_state.weight == cfg.region("us-west-1").weight
                west.admin.post("/faults/clear").raise_for_status()
                wait_until(
                    lambda: "us-west-1" in {_served_by(client, cfg) for _ in range(10)},
                    timeout_s=30,
                    what="us-west-1 back in the rotation",
                )
            finally:
                proc.terminate()
                proc.wait(5)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
