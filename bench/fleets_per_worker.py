"""Many fleets per worker: one `drctl worker` process monitoring N two-region fleets, its CPU and memory.

    python bench/fleets_per_worker.py [--fleets 50] [--baseline 1] [--minutes 1.5]
                                      [--replicas-per-region 4] [--warmup-s 20]

Everything runs on loopback, brought up by the bench and stopped at the end:
- a private Temporal dev server (temporalio's start_local with drctl's search attributes);
- one HAProxy process answering canned vLLM responses (bench/probe_scale.py's server) on a
  distinct (address, port) per gateway and per replica, so the worker is measured, not the server;
- one emulated Kubernetes API (drctl's dev-stack RegionCluster) holding each region's
  EndpointSlices in a namespace of its own, so the worker lists replicas the way production does
  (KubernetesReplicaSource, one list per region per round), with one API server instead of 100.

For the baseline and then for N fleets, a fresh `drctl worker --config-dir DIR` process serves
every fleet (each fleet its own queues), one FleetMonitor per fleet runs with `health.watcher: true`,
and after the warm-up the worker's CPU seconds (utime + stime from /proc/PID/stat) and RSS
(/proc/PID/status) are read over `--minutes` of steady state. The table gives both per minute and
per fleet, and the marginal cost of one more fleet: (N row - baseline row) / (N - baseline).
At the end the worker's /metrics shows every region was probed (drctl_probes_total, per region and
minute since the monitors started), how long a region's probe took (drctl_probe_duration_seconds)
and how many probes were not HEALTHY (all targets are healthy, so any is false).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/fleets_per_worker.py`: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from bench.args import BenchParser
from bench.probe_scale import MODEL, CannedServer, targets
from drctl.cli.monitor import start_monitor
from drctl.config.schema import load_config
from drctl.devstack.kube import serve_cluster
from drctl.models import search_attributes

ROOT = Path(__file__).resolve().parent.parent
REGIONS = ("east", "west")
SERVICE = "llm-stable"  # workload.app "llm", track stable: a Service KubernetesReplicaSource reads
HOST = "127.0.0.2"  # kube API and the worker's HTTP endpoint; the canned targets are on 127.0.1.x
START_TIMEOUT_S = 60.0
_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Row:
    fleets: int
    cpu_s_per_min: float
    rss_mib: float
    probes: int
    not_healthy: int
    probe_s: float
    minutes: float
    probe_minutes: float

    def per_fleet(self, value: float) -> float:
        return value / self.fleets


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = BenchParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.number("--fleets", 50, "Fleets of the big worker", "1..200")
    p.add_argument("--baseline", type=int, default=1, help="Fleets of the baseline worker (default 1).")
    p.number("--minutes", 1.5, "Steady-state window measured per worker", "(0, 30]")
    p.number("--warmup-s", 20.0, "Start-up left out of the window", "[0, 600]")
    p.number("--replicas-per-region", 4, "Replicas behind each gateway", "1..20")
    p.number("--interval-s", 10.0, "health.interval_s, the product's", "[2, 600]")
    p.number("--port-base", 43000, "First port of the canned targets and the kube API", "1024..64000")
    args = p.parse_args(argv)
    if not 1 <= args.baseline < args.fleets:
        p.error("--baseline must be at least 1 and fewer than --fleets")
    return args


def fleet_yaml(
    name: str, urls: list[str], address: str, kube_url: str, args: argparse.Namespace, http_port: int
) -> dict[str, Any]:
    """Fleet `name`: two regions, each a gateway (urls[0], urls[per]) with replicas listed in kube."""
    per = args.replicas_per_region + 1
    regions = [
        {
            "name": r,
            "weight": 50,
            "replicas": args.replicas_per_region,
            "gateway_url": urls[i * per],
            "task_queue": f"{name}-{r}",
            "kube": {"api_url": kube_url, "namespace": f"{name}-{r}"},
            "gateway_runtime_socket": f"/nonexistent/{name}-{r}.sock",
        }
        for i, r in enumerate(REGIONS)
    ]
    return {
        "name": name, "regions": regions, "workload": {"app": "llm", "model": MODEL},
        "health": {"interval_s": args.interval_s, "watcher": True},
        "traffic": {"global_endpoint": "http://127.0.0.1:9", "regional": {"kind": "haproxy"},
                    "global": {"kind": "haproxy", "runtime_socket": "/nonexistent/global.sock"}},
        "temporal": {"address": address, "task_queue": f"{name}-main"},
        "worker": {"http_port": http_port, "http_host": HOST, "sdk_metrics": False},
    }  # fmt: skip


def endpoint_slice(name: str, url: str) -> dict[str, Any]:
    """One replica as the EndpointSlice controller publishes it (one slice per distinct port)."""
    addr, port = url.removeprefix("http://").rsplit(":", 1)
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": f"{SERVICE}-{name}", "labels": {"kubernetes.io/service-name": SERVICE}},
            "endpoints": [{"addresses": [addr], "conditions": {"ready": True, "serving": True, "terminating": False},
                           "targetRef": {"kind": "Pod", "name": name}}],
            "ports": [{"name": "http", "port": int(port), "protocol": "TCP"}]}  # fmt: skip


def cpu_seconds(pid: int) -> float:
    # Fields after the command name: state is 3rd; utime and stime are the 14th and 15th of the line.
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def rss_mib(pid: int) -> float:
    found = re.search(r"^VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    return int(found.group(1)) / 1024 if found else 0.0


def mean_probe_s(text: str, prefix: str) -> float:
    """Mean wall time of one region's probe (drctl_probe_duration_seconds) over this phase's fleets."""
    sums = {"sum": 0.0, "count": 0.0}
    for m in re.finditer(r"^drctl_probe_duration_seconds_(sum|count)\{([^}]*)\} ([0-9.e+]+)$", text, re.M):
        if re.search(rf'fleet="{re.escape(prefix)}', m.group(2)):
            sums[m.group(1)] += float(m.group(3))
    return sums["sum"] / sums["count"] if sums["count"] else 0.0


def probe_counts(text: str, prefix: str) -> tuple[int, int]:
    """(probes, probes not HEALTHY) of this phase's fleets in a /metrics page."""
    total = bad = 0
    for m in re.finditer(r"^drctl_probes_total\{([^}]*)\} ([0-9.e+]+)$", text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if not labels.get("fleet", "").startswith(prefix):
            continue
        n = int(float(m.group(2)))
        total += n
        bad += n if labels.get("status") != "HEALTHY" else 0
    return total, bad


class Phase:
    """One worker process serving `count` fleets, their kube objects and their monitors."""

    def __init__(self, count: int, args: argparse.Namespace, client: Client, address: str, kube: Any) -> None:
        self.count, self.args, self.client, self.address, self.kube = count, args, client, address, kube
        self.prefix = f"n{count}-"
        self.dir = Path(tempfile.mkdtemp(prefix="fleets-bench-"))
        self.http_port = args.port_base + 1
        self.log = self.dir / "worker.log"

    async def seed(self, urls: list[str]) -> list[Path]:
        per = self.args.replicas_per_region + 1
        kube_url = f"http://{HOST}:{self.args.port_base}"
        files = []
        for i in range(self.count):
            name = f"{self.prefix}f{i:03d}"
            mine = urls[i * 2 * per : (i + 1) * 2 * per]
            for j, region in enumerate(REGIONS):
                for k, url in enumerate(mine[j * per + 1 : (j + 1) * per]):
                    await self.kube.create_object(
                        "discovery.k8s.io/v1/endpointslices",
                        endpoint_slice(f"r{k}", url),
                        namespace=f"{name}-{region}",
                    )
            path = self.dir / f"{name}.yaml"
            path.write_text(
                yaml.safe_dump(fleet_yaml(name, mine, self.address, kube_url, self.args, self.http_port))
            )
            files.append(path)
        return files

    def start_worker(self) -> subprocess.Popen[bytes]:
        with self.log.open("wb") as out:
            return subprocess.Popen([sys.executable, "-m", "drctl", "worker", "--config-dir", str(self.dir)],
                                    stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                    env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip

    async def wait_serving(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited {proc.returncode}:\n{self.log.read_text()[-3000:]}")
            if self.log.read_text().count("serving task queues") >= self.count:
                return
            await asyncio.sleep(0.2)
        raise RuntimeError(f"worker not serving {self.count} fleets within {START_TIMEOUT_S:g}s")

    async def run(self, urls: list[str]) -> Row:
        files = await self.seed(urls)
        proc = self.start_worker()
        try:
            await self.wait_serving(proc)
            handles = [(await start_monitor(self.client, load_config(f)))[0] for f in files]
            started = time.monotonic()
            await asyncio.sleep(self.args.warmup_s)
            cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
            rss_max = rss_mib(proc.pid)
            end = t0 + self.args.minutes * 60
            while time.monotonic() < end:  # bounded by the window; RSS sampled every few seconds
                await asyncio.sleep(min(5.0, max(0.0, end - time.monotonic())))
                rss_max = max(rss_max, rss_mib(proc.pid))
            cpu1, t1 = cpu_seconds(proc.pid), time.monotonic()
            page = await asyncio.to_thread(_get, f"http://{HOST}:{self.http_port}/metrics")
            probes, bad = probe_counts(page, self.prefix)
            probe_minutes = (time.monotonic() - started) / 60
            for h in handles:
                await h.terminate("bench done")
            return Row(
                self.count,
                (cpu1 - cpu0) / ((t1 - t0) / 60),
                rss_max,
                probes,
                bad,
                mean_probe_s(page, self.prefix),
                (t1 - t0) / 60,
                probe_minutes,
            )
        finally:
            proc.terminate()
            try:
                await asyncio.to_thread(proc.wait, 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait, 10)
            shutil.rmtree(self.dir, ignore_errors=True)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=20) as resp:  # noqa: S310 - the bench's own loopback endpoint
        return str(resp.read().decode())


async def _run(args: argparse.Namespace) -> list[Row]:
    per_fleet = 2 * (args.replicas_per_region + 1)
    urls = targets(args.fleets * per_fleet, args.port_base)
    temporal = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    with CannedServer(len(urls), args.port_base):
        async with (
            await WorkflowEnvironment.start_local(
                dev_server_existing_path=temporal,
                data_converter=pydantic_data_converter,
                search_attributes=search_attributes.ALL,
            ) as env,
            serve_cluster(HOST, args.port_base) as kube,
        ):
            address = env.client.service_client.config.target_host
            rows = []
            for count in (args.baseline, args.fleets):
                print(
                    f"worker with {count} fleet(s): warm-up {args.warmup_s:g}s, window {args.minutes:g} min ...",
                    file=sys.stderr,
                    flush=True,
                )
                rows.append(await Phase(count, args, env.client, address, kube).run(urls))
    return rows


def render(rows: list[Row], args: argparse.Namespace) -> str:
    head = (
        f"fleets_per_worker {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores; 2 regions per fleet, "
        f"{args.replicas_per_region} replicas per region, interval {args.interval_s:g}s, watcher on; "
        f"window {args.minutes:g} min after {args.warmup_s:g}s warm-up"
    )
    lines = [
        head,
        "| fleets | CPU s/min | CPU s/min per fleet | RSS MiB (max) | RSS MiB per fleet | "
        "probes per region-min | probe s (mean) | probes not HEALTHY |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        rate = r.probes / (2 * r.fleets * r.probe_minutes) if r.probe_minutes else 0.0
        lines.append(
            f"| {r.fleets} | {r.cpu_s_per_min:.2f} | {r.per_fleet(r.cpu_s_per_min):.3f} | {r.rss_mib:.0f} | "
            f"{r.per_fleet(r.rss_mib):.1f} | {rate:.1f} | {r.probe_s:.2f} | {r.not_healthy} of {r.probes} |"
        )
    base, big = rows[0], rows[-1]
    n = big.fleets - base.fleets
    lines.append(
        f"| marginal, per fleet ({base.fleets} -> {big.fleets}) | | "
        f"{(big.cpu_s_per_min - base.cpu_s_per_min) / n:.3f} | | {(big.rss_mib - base.rss_mib) / n:.1f} | | | |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("haproxy") is None:
        print("fleets_per_worker: haproxy not found on PATH", file=sys.stderr)
        return 2
    rows = asyncio.run(_run(args))
    print(render(rows, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
