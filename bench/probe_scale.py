"""Probe-scale benchmark: one probe round over N replicas, the old prober and the new side by side.

    python bench/probe_scale.py [--sizes 100,1000,5000] [--rounds 3] [--concurrency 8]
                                [--sample 0.1] [--json out.json]

The replicas are one HAProxy process answering canned vLLM responses (`http-request return`:
/health, /v1/models, /metrics with vLLM histograms, /v1/completions as SSE) on N distinct
loopback (address, port) pairs, so the prober is what gets measured, not the server. Every
target is healthy, so any target reported other than HEALTHY is a false DOWN. Replicas the new
prober did not reach within its round budget (3 x probe_timeout_s) are counted apart: unknown.

Each prober runs in its own process pinned to one core (os.sched_setaffinity); it reports wall
time and CPU seconds (time.process_time) per round. The old prober is bench/probe_baseline.py:
the prober's request machinery from before issue 12, over the product's verdicts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/probe_scale.py`: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.args import BenchParser
from drctl.config.schema import FleetConfig, RegionConfig, parse_config
from drctl.providers.replicas import ReplicaEndpoint

MODEL = "bench-model"
PORTS_PER_ADDRESS = 1000
START_TIMEOUT_S = 15.0
WORKER_TIMEOUT_S = 300.0
HISTOGRAM_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0)


def _metrics_page() -> str:
    """A vLLM-shaped /metrics page: the gauges the prober reads plus TTFT and e2e histograms."""
    lbl = f'model_name="{MODEL}"'
    lines = [f"vllm:num_requests_running{{{lbl}}} 1.0", f"vllm:num_requests_waiting{{{lbl}}} 0.0",
             f"vllm:gpu_cache_usage_perc{{{lbl}}} 0.1"]  # fmt: skip
    for name in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"):
        lines.append(f"# TYPE {name} histogram")
        lines += [f'{name}_bucket{{{lbl},le="{b}"}} {i * 3}' for i, b in enumerate(HISTOGRAM_BUCKETS)]
        lines += [
            f'{name}_bucket{{{lbl},le="+Inf"}} 45',
            f"{name}_sum{{{lbl}}} 1.35",
            f"{name}_count{{{lbl}}} 45",
        ]
    lines += [f'vllm:request_success_total{{{lbl},finished_reason="length"}} 45']
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    # HAProxy argument quoting: backslash escapes inside double quotes; lf-string also expands '%'.
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("%", "%%") + '"'


def haproxy_config(n: int, port_base: int) -> str:
    """One frontend bound to exactly the N target (address, port) pairs of `targets`."""
    models = json.dumps({"object": "list", "data": [{"id": MODEL, "object": "model"}]})
    chunk = json.dumps({"id": "cmpl-bench", "object": "text_completion", "model": MODEL,
                        "choices": [{"index": 0, "text": "ok", "finish_reason": "length"}]})  # fmt: skip
    sse = f"data: {chunk}\n\ndata: [DONE]\n\n"
    binds = "\n".join(
        f"    bind 127.0.1.{1 + i}:{port_base}-{port_base + min(PORTS_PER_ADDRESS, n - i * PORTS_PER_ADDRESS) - 1}"
        for i in range((n + PORTS_PER_ADDRESS - 1) // PORTS_PER_ADDRESS)
    )
    return f"""global
    maxconn 4000
    nbthread 1
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
    timeout http-keep-alive 10s
frontend replicas
{binds}
    http-request return status 200 content-type text/plain string ok if {{ path /health }}
    http-request return status 200 content-type application/json lf-string {_quote(models)} if {{ path /v1/models }}
    http-request return status 200 content-type "text/plain; version=0.0.4" \
        lf-string {_quote(_metrics_page())} if {{ path /metrics }}
    http-request return status 200 content-type text/event-stream lf-string {_quote(sse)} if {{ path /v1/completions }}
    http-request return status 404 content-type text/plain string "not found"
"""


def targets(n: int, port_base: int) -> list[str]:
    """N distinct loopback targets: 127.0.1.1, 127.0.1.2, ... each with PORTS_PER_ADDRESS ports."""
    return [
        f"http://127.0.1.{1 + i // PORTS_PER_ADDRESS}:{port_base + i % PORTS_PER_ADDRESS}" for i in range(n)
    ]


class CannedServer:
    """The HAProxy process; started and stopped by the bench, never left running."""

    def __init__(self, n: int, port_base: int) -> None:
        self.n, self.port_base = n, port_base
        self.dir = Path(tempfile.mkdtemp(prefix="probe-scale-"))
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> CannedServer:
        cfg = self.dir / "haproxy.cfg"
        cfg.write_text(haproxy_config(self.n, self.port_base))
        check = subprocess.run(
            ["haproxy", "-c", "-q", "-f", str(cfg)], capture_output=True, text=True, timeout=30
        )
        if check.returncode != 0:
            raise RuntimeError(f"haproxy rejected {cfg}: {check.stderr.strip()}")
        self.proc = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)  # fmt: skip
        last = targets(self.n, self.port_base)[-1].removeprefix("http://").rsplit(":", 1)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise RuntimeError(f"haproxy exited {self.proc.returncode}: {err.strip()}")
            try:
                socket.create_connection((last[0], int(last[1])), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.1)
        self.__exit__()
        raise RuntimeError(f"haproxy not listening on {last} within {START_TIMEOUT_S:g}s")

    def __exit__(self, *_: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


class StaticReplicas:
    """The bench's replica list: fixed, so listing costs nothing and only probing is measured."""

    def __init__(self, urls: list[str]) -> None:
        self.endpoints = [ReplicaEndpoint(name=f"r{i:05d}", url=u) for i, u in enumerate(urls)]

    async def replicas(self, region: RegionConfig) -> list[ReplicaEndpoint]:
        return self.endpoints


def bench_config(
    gateway_url: str, concurrency: int, sample: float, timeout_s: float = 2.0, ttft_ms: float = 2000.0
) -> FleetConfig:
    return parse_config(f"""
name: probe-scale
regions:
  - {{name: r1, weight: 100, gateway_url: "{gateway_url}", kube: {{api_url: "http://127.0.0.1:1", namespace: x}}}}
workload: {{model: {MODEL}}}
health: {{interval_s: 10, probe_timeout_s: {timeout_s}, ttft_degraded_ms: {ttft_ms}, probe_concurrency: {concurrency},
          completion_sample: {sample}}}
traffic:
  global_endpoint: http://127.0.0.1:1
  global: {{kind: route53, hosted_zone_id: Z1, record_name: api.example.com, targets: {{r1: a}}}}
  regional: {{kind: gateway-api}}
""")


async def _rounds(spec: dict[str, Any]) -> list[dict[str, Any]]:
    if spec["prober"] == "old":
        from bench.probe_baseline import InferenceProber as Old

        prober: Any = Old(spec["cfg"], replica_source=StaticReplicas(spec["urls"]))
    else:
        from drctl.providers.probe import InferenceProber

        prober = InferenceProber(spec["cfg"], replica_source=StaticReplicas(spec["urls"]))
    out = []
    for _ in range(spec["rounds"]):
        wall, cpu = time.perf_counter(), time.process_time()
        probe = await prober.probe_region("r1")
        false_down = sum(t.status.value != "HEALTHY" for t in [probe.gateway, *probe.replicas])
        out.append({"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
                    "false_down": false_down, "unprobed": len(spec["urls"]) - len(probe.replicas),
                    "region": probe.status.value})  # fmt: skip
    return out


def worker(argv: list[str]) -> None:
    """Child process: pin to one core, run the rounds, print one JSON line."""
    prober, n, rounds, port_base, concurrency, sample = argv
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    urls = targets(int(n), int(port_base))
    cfg = bench_config(urls[0], int(concurrency), float(sample))
    spec = {"prober": prober, "cfg": cfg, "urls": urls, "rounds": int(rounds)}
    print(json.dumps(asyncio.run(_rounds(spec))))


def run_one(prober: str, n: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    cmd = [sys.executable, __file__, "--worker", prober, str(n), str(args.rounds), str(args.port_base),
           str(args.concurrency), str(args.sample)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=WORKER_TIMEOUT_S, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{prober} prober at N={n} failed: {done.stderr.strip()[-2000:]}")
    rows: list[dict[str, Any]] = json.loads(done.stdout.strip().splitlines()[-1])
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = BenchParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--sizes", default="100,1000,5000", help="comma-separated replica counts (1..5000)")
    p.number("--rounds", 3, "probe rounds per prober and size", "1..20")
    p.number(
        "--concurrency",
        64,
        "health.probe_concurrency for both probers",
        "1..64",
        why="the old prober's limit",
    )
    p.number("--sample", 0.1, "health.completion_sample for the new prober", "(0, 1]")
    p.number(
        "--port-base", 41000, "first port of each loopback address", f"1024..{65535 - PORTS_PER_ADDRESS}"
    )
    p.add_argument("--json", type=Path, help="also write the rows here")
    args = p.parse_args(argv)
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        p.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    if not args.sizes or any(not 1 <= s <= 5000 for s in args.sizes):
        p.error("--sizes must each be in 1..5000")
    return args


def format_table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| N | prober | wall s/round (max) | CPU s/round (max) | false DOWN (all rounds) | not probed in time |\n"
        "|---|---|---|---|---|---|"
    )
    body = [
        f"| {r['n']} | {r['prober']} | {r['wall_s']:.2f} ({r['wall_max_s']:.2f}) | "
        f"{r['cpu_s']:.2f} ({r['cpu_max_s']:.2f}) | {r['false_down']} | {r['unprobed']} |"
        for r in rows
    ]
    return "\n".join([head, *body])


def summarise(prober: str, n: int, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    walls, cpus = [r["wall_s"] for r in rounds], [r["cpu_s"] for r in rounds]
    return {"n": n, "prober": prober, "wall_s": sum(walls) / len(walls), "wall_max_s": max(walls),
            "cpu_s": sum(cpus) / len(cpus), "cpu_max_s": max(cpus),
            "false_down": sum(r["false_down"] for r in rounds),
            "unprobed": sum(r.get("unprobed", 0) for r in rounds), "rounds": rounds}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2:])
        return 0
    args = parse_args(argv)
    if shutil.which("haproxy") is None:
        print("probe_scale: haproxy not found on PATH", file=sys.stderr)
        return 2
    rows = []
    with CannedServer(max(args.sizes), args.port_base):
        for n in args.sizes:
            for prober in ("old", "new"):
                rows.append(summarise(prober, n, run_one(prober, n, args)))
                print(f"N={n} {prober}: {rows[-1]['wall_s']:.2f}s wall, {rows[-1]['cpu_s']:.2f}s CPU, "
                      f"{rows[-1]['false_down']} false DOWN", file=sys.stderr, flush=True)  # fmt: skip
    print(
        f"probe_scale {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, "
        f"concurrency {args.concurrency}, sample {args.sample:g}, {args.rounds} round(s)"
    )
    print(format_table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
