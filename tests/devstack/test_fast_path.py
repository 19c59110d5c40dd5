"""The global tier's optional fast path, rendered by `drctl dev up` and run by a real HAProxy 2.6.

us-west-1 (weight 60) is broken in each of the ways the fast path covers: nothing listening on
its gateway (the region is hard down), or a gateway that answers 503 (no replica left behind it).
us-east-1 (weight 40) is a plain server. Without the fast path, users see the broken region's
share as errors until drctl moves the weights; with it, every request is answered by us-east-1.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from drctl.config.schema import load_config
from drctl.devstack import processes, stack
from drctl.devstack.haproxy_conf import global_socket, render_global
from drctl.devstack.restart import restart_global_gateway
from drctl.providers.traffic_factory import global_traffic
from tests.support.config import write_fleet_config
from tests.support.http_stub import Reply, StubServer
from tests.support.ports import free_port
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
    """A global HAProxy from the dev stack's own renderer; yields its endpoint URL."""
    path = write_fleet_config(overrides={"traffic": {"global": {"fast_path": fast_path}}})
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


def test_fast_path_is_off_by_default_and_renders_the_retry_lines() -> None:
    path = write_fleet_config()
    try:
        cfg = load_config(path)
        assert "retry-on" not in render_global(cfg) and "redispatch" not in render_global(cfg)
        on = cfg.model_copy(
            update={
                "traffic": cfg.traffic.model_copy(
                    update={"global_tier": cfg.traffic.global_tier.model_copy(update={"fast_path": True})}
                )
            }
        )
        text = render_global(on)
        assert "retry-on conn-failure empty-response 503" in text and "option redispatch 1" in text
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


def test_compose_global_config_documents_the_same_lines() -> None:
    """deploy/compose/haproxy-global.cfg shows the fast path commented out, line for line as rendered."""
    path = write_fleet_config(overrides={"traffic": {"global": {"fast_path": True}}})
    try:
        rendered = [ln.strip() for ln in render_global(load_config(path)).splitlines()]
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)
    compose = (Path(__file__).resolve().parents[2] / "deploy/compose/haproxy-global.cfg").read_text()
    lines = [
        ln
        for ln in rendered
        if ln.startswith(("retries", "option redispatch", "retry-on", "option http-buffer"))
    ]
    assert len(lines) == 4
    for ln in lines:
        assert f"# {ln}\n" in compose, ln


def test_the_global_gateway_restarts_on_its_re_rendered_config() -> None:
    """What bench/rto.py's fastpath policy does between trials: the dev stack's global HAProxy
    component, restarted on the config re-rendered with the fast path on, then off again.
    (Its own state dir, not the session stack, whose recorded pids other tests compare.)"""
    path = write_fleet_config()
    off = load_config(path)
    on = off.model_copy(
        update={
            "traffic": off.traffic.model_copy(
                update={"global_tier": off.traffic.global_tier.model_copy(update={"fast_path": True})}
            )
        }
    )
    glob = stack.state_dir(off) / "haproxy" / "global.cfg"
    glob.parent.mkdir(parents=True, exist_ok=True)
    try:
        first = restart_global_gateway(on, path)
        assert "retry-on conn-failure empty-response 503" in glob.read_text()
        second = restart_global_gateway(off, path)
        assert second != first and "retry-on" not in glob.read_text()
        assert not processes.pid_alive(first) and processes.pid_alive(second)
        assert global_traffic(off).get_weights() == off.weights
    finally:
        stack.down(off)
        shutil.rmtree(path.parent, ignore_errors=True)
