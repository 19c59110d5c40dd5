"""Real components for the passive-signal tests: two fleetsim replicas, an HAProxy gateway, Prometheus.

Two fleetsim replicas (us-west-1 and us-east-1) run as subprocesses; a real HAProxy region gateway
sits in front of the us-west-1 replica (backend `region`, a second backend `sse` for streams, and
a backend `broken` whose only server is a closed port); the real `prometheus` binary scrapes both
replicas every 250 ms with a `region` label, as a production relabelling would set it.

The two replicas expose the two vLLM metric surfaces (FLEETSIM_VLLM_METRICS): us-west-1 the V0
engine's names, us-east-1 today's V1 names, as a fleet half-way through a vLLM upgrade would, so
every reader here is shown to work with either.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from drctl.models.passive import PassiveThresholds
from drctl.providers.haproxy_runtime import HAProxyRuntime
from tests.support.ports import free_port
from tests.support.wait import wait_until

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
MODEL = "fleetsim-tiny"
TTFT_MS = 20
TH = PassiveThresholds(window_s=3, max_error_rate=0.2, max_ttft_p99_ms=2000, min_requests=10, max_age_s=2)


@dataclass
class Env:
    west: str
    east: str
    gateway: str
    broken: str
    sse: str
    runtime: HAProxyRuntime
    prometheus: str


def _spawn(args: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)


SURFACE = {"us-west-1": "v0", "us-east-1": "v1"}


def _fleetsim(region: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "FLEETSIM_VLLM_METRICS": SURFACE[region],
        "FLEETSIM_REGION": region,
        "FLEETSIM_REPLICA": f"{region}-0",
        "FLEETSIM_TTFT_MS": str(TTFT_MS),
        "FLEETSIM_ITL_MS": "1",
    }
    return _spawn(
        [sys.executable, "-m", "drctl.devstack.fleetsim", "--host", "127.0.0.1", "--port", str(port)],
        log,
        env,
    )


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1, trust_env=False).status_code == 200
    except httpx.TransportError:
        return False


@contextmanager
def running(tmp: Path) -> Iterator[Env]:
    """Start the processes under `tmp`; stop them on exit."""
    west_p, east_p, gw_p, broken_p, dead_p, prom_p, sse_p = (free_port() for _ in range(7))
    sock = str(tmp / "gw.sock")
    (tmp / "gw.cfg").write_text(f"""
global
    stats socket {sock} mode 600 level admin
defaults
    mode http
    timeout connect 1s
    timeout client 10s
    timeout server 10s
frontend gateway
    bind 127.0.0.1:{gw_p}
    default_backend region
frontend broken
    bind 127.0.0.1:{broken_p}
    default_backend broken
frontend sse
    bind 127.0.0.1:{sse_p}
    default_backend sse
backend region
    server stable 127.0.0.1:{west_p}
backend sse
    server stable 127.0.0.1:{west_p}
backend broken
    # No retry: HAProxy waits min(timeout connect, 1 s) before each, which only slows the test.
    retries 0
    server gone 127.0.0.1:{dead_p}
""")
    (tmp / "prometheus.yml").write_text(f"""
global: {{scrape_interval: 250ms, scrape_timeout: 200ms}}
scrape_configs:
  - job_name: vllm
    static_configs:
      - {{targets: ["127.0.0.1:{west_p}"], labels: {{region: us-west-1}}}}
      - {{targets: ["127.0.0.1:{east_p}"], labels: {{region: us-east-1}}}}
""")
    procs = [
        _fleetsim("us-west-1", west_p, tmp / "west.log"),
        _fleetsim("us-east-1", east_p, tmp / "east.log"),
        _spawn([HAPROXY, "-db", "-f", str(tmp / "gw.cfg")], tmp / "haproxy.log"),
        _spawn(
            [
                PROMETHEUS,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{prom_p}",
                "--log.level=warn",
            ],
            tmp / "prometheus.log",
        ),
    ]
    e = Env(
        west=f"http://127.0.0.1:{west_p}",
        east=f"http://127.0.0.1:{east_p}",
        gateway=f"http://127.0.0.1:{gw_p}",
        broken=f"http://127.0.0.1:{broken_p}",
        sse=f"http://127.0.0.1:{sse_p}",
        runtime=HAProxyRuntime(sock),
        prometheus=f"http://127.0.0.1:{prom_p}",
    )
    try:
        for url in (f"{e.west}/health", f"{e.east}/health", f"{e.prometheus}/-/ready"):
            wait_until(lambda u=url: _answers(u), timeout_s=20, interval_s=0.05, what=url)
        wait_until(lambda: os.path.exists(sock), timeout_s=10, interval_s=0.05, what="haproxy socket")
        yield e
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


def complete(client: httpx.Client, base: str, n: int) -> list[int]:
    body = {"model": MODEL, "prompt": "hi", "max_tokens": 2}
    return [client.post(f"{base}/v1/completions", json=body).status_code for _ in range(n)]


def fault(base: str, **spec: object) -> None:
    if spec:
        httpx.post(f"{base}/admin/fault", json=spec, timeout=2, trust_env=False).raise_for_status()
    else:
        httpx.delete(f"{base}/admin/fault", timeout=2, trust_env=False).raise_for_status()
