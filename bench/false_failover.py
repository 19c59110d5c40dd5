"""False-failover bench: a healthy fleet with one flapping replica and normal TTFT jitter, watched.

    python bench/false_failover.py [--minutes 10] [--flap-s 5] [--jitter 0.5] [--replicas 4]

Nothing is wrong with the fleet as a whole: one us-west-1 replica flaps (answers 503 for flap_s,
then serves for flap_s, over and over), and every replica's TTFT is redrawn each second between the
base and base × (1 + jitter). Users send `--rps` requests a second through the global endpoint.

Three monitors watch the same fleet side by side in the same run, on one worker:
- drctl: the default config (watcher, passive signals, fast confirm, vantage quorum), policy
  automatic: every Failover it starts is a false failover;
- rounds and baseline (the first release's monitor, and interval × threshold), policy manual under
  their own fleet names: each UNHEALTHY episode is a failover they would have started.
The bench samples each monitor's status every second and prints, per monitor, the failovers
started, the UNHEALTHY and SUSPECT episodes (passive ones apart) and the time spent SUSPECT.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import random
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/false_failover.py`: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from temporalio.client import Client
from temporalio.service import RPCError

from activities.chaos import _load as run_load  # the drills' bounded open-loop generator
from bench import rto_fleet
from bench.args import BOUNDED_LOAD, BenchParser
from bench.rto import policy_config
from bench.rto_report import Policy
from drctl.cli.monitor import start_monitor
from drctl.config.schema import FleetConfig
from drctl.devstack import stack
from drctl.models.drill import LoadSample
from drctl.models.health import RegionState
from drctl.models.monitor import MonitorStatus
from drctl.providers.auth import auth_headers

WATCHED: tuple[Policy, ...] = ("drctl", "rounds", "baseline")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = BenchParser(prog="bench/false_failover.py", description=__doc__.split("\n")[0])
    p.number("--minutes", 10.0, "How long the fleet is watched", "(0, 60]")
    p.number("--flap-s", 5.0, "The flapping replica's down and up spells, s", "[0.5, 600]")
    p.number("--jitter", 0.5, "TTFT drawn in base x [1, 1 + jitter]", "[0, 5]")
    p.number(
        "--replicas", 4, "Replicas per region", "[2, 16]", why="one flapping replica must not be the region"
    )
    p.number("--rps", 10.0, "User load through the global endpoint", "(0, 100]", why=BOUNDED_LOAD)
    p.add_argument("--base-ttft-ms", type=float, default=150.0, help="Steady-state TTFT (default 150).")
    p.add_argument("--interval-s", type=float, default=10.0, help="Health check interval (default 10).")
    p.number("--threshold", 3, "Consecutive failed checks for UNHEALTHY", ">= 1")
    p.add_argument("--json", type=Path, default=None, help="Write the figures here.")
    return p.parse_args(argv)


@dataclass
class Watch:
    """What one monitor did, from its status sampled every second."""

    policy: Policy
    fleet: str
    failovers: int = 0
    episodes: dict[str, int] = field(
        default_factory=lambda: {"UNHEALTHY": 0, "SUSPECT": 0, "passive SUSPECT": 0}
    )
    suspect_s: float = 0.0
    samples: int = 0
    last: dict[str, RegionState] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)

    def observe(self, st: MonitorStatus, dt: float) -> None:
        self.samples += 1
        for name, t in st.regions.items():
            before = self.last.get(name, RegionState.HEALTHY)
            if t.state is RegionState.SUSPECT:
                self.suspect_s += dt
            if t.state is not before and t.state in (RegionState.UNHEALTHY, RegionState.SUSPECT):
                self.episodes[t.state.value] += 1
                if t.state is RegionState.UNHEALTHY:
                    self.reasons.append(f"{name}: {t.last_reason}")
                if t.state is RegionState.SUSPECT and (t.last_reason or "").startswith("passive:"):
                    self.episodes["passive SUSPECT"] += 1
            self.last[name] = t.state

    def row(self) -> list[str]:
        e = self.episodes
        return [
            self.policy,
            self.fleet,
            str(self.failovers),
            str(e["UNHEALTHY"]),
            str(e["SUSPECT"]),
            str(e["passive SUSPECT"]),
            f"{self.suspect_s:.0f}",
            str(self.samples),
        ]


def monitor_config(cfg: FleetConfig, policy: Policy) -> FleetConfig:
    """drctl watches the fleet itself (automatic); the others under their own names, manual."""
    pcfg = policy_config(cfg, policy)
    if policy == "drctl":
        return pcfg
    failover = pcfg.failover.model_copy(update={"policy": "manual"})
    return pcfg.model_copy(update={"name": f"{cfg.name}-{policy}", "failover": failover})


def _replica_ports(cfg: FleetConfig, region: str) -> list[int]:
    data = json.loads((stack.state_dir(cfg) / f"replicas-{region}.json").read_text())
    return [int(r["port"]) for r in data["replicas"] if r.get("track") == "stable"]


async def _flap(client: httpx.AsyncClient, port: int, spell_s: float, deadline: float) -> int:
    """Down for a spell, up for a spell, until the deadline; returns how many times it went down."""
    downs = 0
    url = f"http://127.0.0.1:{port}/admin/fault"
    try:
        while time.monotonic() < deadline:
            await client.post(url, json={"down": True})
            downs += 1
            await asyncio.sleep(spell_s)
            await client.post(url, json={"down": False})
            await asyncio.sleep(spell_s)
    finally:
        with contextlib.suppress(httpx.HTTPError):
            await client.post(url, json={"down": False})
    return downs


async def _jitter(
    client: httpx.AsyncClient, ports: list[int], base_ms: float, jitter: float, deadline: float
) -> None:
    """Every second each replica's TTFT is redrawn in base x [1, 1 + jitter] (uniform)."""
    rng = random.Random(7)
    while time.monotonic() < deadline:
        for port in ports:
            with contextlib.suppress(httpx.HTTPError):
                await client.post(
                    f"http://127.0.0.1:{port}/admin/fault",
                    json={"added_latency_ms": rng.uniform(0, jitter) * base_ms},
                )
        await asyncio.sleep(1.0)


async def _failovers_since(client: Client, fleet: str, t0: datetime) -> int:
    n = 0
    async for wf in client.list_workflows(
        f"WorkflowId = 'failover/{fleet}' AND StartTime > '{t0.isoformat()}'"
    ):
        n += 1 if wf.id else 0
    return n


async def watch(cfg: FleetConfig, args: argparse.Namespace) -> tuple[list[Watch], dict[str, Any]]:
    watches = [Watch(policy=p, fleet=monitor_config(cfg, p).name) for p in WATCHED]
    samples: list[LoadSample] = []
    ports = {r.name: _replica_ports(cfg, r.name) for r in cfg.regions}
    flapper = ports[cfg.regions[0].name][0]
    async with rto_fleet.running_worker(cfg) as client, httpx.AsyncClient(timeout=5) as admin:
        handles = [(w, (await start_monitor(client, monitor_config(cfg, w.policy)))[0]) for w in watches]
        t0 = datetime.now(UTC)
        deadline = time.monotonic() + args.minutes * 60
        load = asyncio.create_task(run_load(cfg, args.rps, deadline, samples, auth_headers(cfg), 10.0))
        flap = asyncio.create_task(_flap(admin, flapper, args.flap_s, deadline))
        jitter = asyncio.create_task(
            _jitter(admin, [p for ps in ports.values() for p in ps], args.base_ttft_ms, args.jitter, deadline)
        )
        try:
            last = time.monotonic()
            while (now := time.monotonic()) < deadline:
                for w, h in handles:
                    with contextlib.suppress(RPCError):
                        w.observe(await h.query("status", result_type=MonitorStatus), now - last)
                last = now
                await asyncio.sleep(1.0)
            downs = await flap
        finally:
            for task in (load, flap, jitter):
                task.cancel()
            await asyncio.gather(load, flap, jitter, return_exceptions=True)
            for _, h in handles:
                with contextlib.suppress(RPCError):
                    await h.terminate("bench done")
        for w in watches:
            w.failovers = await _failovers_since(client, w.fleet, t0)
    bad = sum(not s.ok for s in samples)
    return watches, {
        "requests": len(samples),
        "failed_requests": bad,
        "flaps": downs,
        "flapping_port": flapper,
    }


def render(watches: list[Watch], extra: dict[str, Any], args: argparse.Namespace) -> str:
    head = ["monitor", "fleet", "failovers", "UNHEALTHY", "SUSPECT", "passive", "SUSPECT s", "samples"]
    body = [w.row() for w in watches]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join(
        [
            f"False-failover bench: {args.minutes:g} min, one us-west-1 replica of {args.replicas} flapping "
            f"({args.flap_s:g} s down / {args.flap_s:g} s up, {extra['flaps']} times), TTFT {args.base_ttft_ms:g} ms "
            f"x [1, {1 + args.jitter:g}], {args.rps:g} rps ({extra['failed_requests']}/{extra['requests']} failed), "
            f"interval {args.interval_s:g} s, threshold {args.threshold}",
            "",
            line(head),
            line(["-" * w for w in widths]),
            *(line(b) for b in body),
            *(f"  {w.policy} UNHEALTHY: {why}" for w in watches for why in w.reasons),
            "",
            "failovers: Failover runs started (drctl, automatic); the manual monitors start none, their "
            "UNHEALTHY episodes are the failovers they would have started.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.getLogger("temporalio").setLevel(logging.ERROR)
    cfg_path = rto_fleet.write_bench_config(args.interval_s, args.threshold, replicas=args.replicas)
    cfg = rto_fleet.load(cfg_path)
    try:
        print(f"bringing the dev stack up (config {cfg_path}) ...", flush=True)
        rto_fleet.stack_up(cfg, cfg_path, args.base_ttft_ms)
        watches, extra = asyncio.run(watch(cfg, args))
    except rto_fleet.stack.StackError as exc:
        print(f"dev stack did not come up: {exc}\n--- {exc.component} log ---\n{exc.log}", file=sys.stderr)
        return 1
    finally:
        rto_fleet.stack_down(cfg)
    print(render(watches, extra, args))
    if args.json:
        args.json.write_text(json.dumps({"watches": [w.row() for w in watches], **extra}, indent=2))
    return 1 if watches[0].failovers else 0


if __name__ == "__main__":
    sys.exit(main())
