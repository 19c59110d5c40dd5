"""Control-plane loss bench: users' error share per second when the primary region dies, three cases side by side.

    python bench/control_plane.py [--window-s 60] [--warmup-s 5] [--rps 20] [--data-plane on|off]
                                  [--cases temporal-up,temporal-stopped,temporal-and-worker-stopped]
                                  [--json out.json]

One private dev stack on free loopback ports (bench/rto_fleet.py) with its two workers as processes
(`drctl dev up --workers`: one per region, as in production) and drctl's monitor running, the data
plane as shipped (the global tier's fast path and gateway health checks on; `--data-plane off` turns
both off, to see what drctl alone gives users). Users send a fixed
rate of 1-token completions through the global endpoint. At t0 us-west-1 (weight 60, the primary)
dies: its gateway and every stable replica are killed and kept down. In each case the control
plane is in a different state when it does:

- temporal-up: Temporal and both workers run; the monitor may fail over as well;
- temporal-stopped: the Temporal dev server is stopped just before, through us-west-1's admin API;
- temporal-and-worker-stopped: Temporal and us-west-1's worker are both stopped just before.

Each case starts from a reset fleet: faults cleared (which starts Temporal and the worker again),
weights 60/40, the monitor restarted and every region probed HEALTHY. The table is the share of
requests sent in each second after t0 that failed; the global weights read at the window's end
show whether drctl moved users (a failover) or the data plane carried them alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/control_plane.py`: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import yaml

from bench import rto_fleet
from bench.args import BOUNDED_LOAD, BenchParser
from bench.rto import _monitor_ready, _stop_monitor
from drctl.cli.monitor import start_monitor
from drctl.client.connection import connect
from drctl.config.schema import FleetConfig
from drctl.devstack import readiness
from drctl.devstack.processes import port_bindable
from drctl.providers.traffic_factory import global_traffic

CASES = ("temporal-up", "temporal-stopped", "temporal-and-worker-stopped")
STOPPED = {
    "temporal-up": (),
    "temporal-stopped": ("temporal",),
    "temporal-and-worker-stopped": ("temporal", "worker"),
}
PRIMARY = "us-west-1"
REQUEST_TIMEOUT_S = 5.0
STOP_BOUND_S = 60.0  # stopping Temporal and a worker: SIGTERM, then SIGKILL after 10 s each
CLEAR_TIMEOUT_S = 150.0  # a clear waits until a stopped Temporal server and worker serve again


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = BenchParser(prog="bench/control_plane.py", description=__doc__.split("\n")[0])
    p.number("--window-s", 60.0, "Seconds measured after the region dies, per case", "[5, 600]")
    p.number("--warmup-s", 5.0, "Seconds of load before the region dies", "[0, 60]")
    p.number(
        "--rps", 20.0, "Users' requests per second through the global endpoint", "(0, 100]", BOUNDED_LOAD
    )
    p.add_argument(
        "--data-plane",
        choices=("on", "off"),
        default="on",
        help="The global tier's fast path and gateway health checks: on as shipped (default), or off to "
        "see what users get from drctl alone.",
    )
    p.add_argument(
        "--cases", default=",".join(CASES), help=f"Comma list of {', '.join(CASES)} (default: all)."
    )
    p.add_argument("--json", type=Path, default=None, help="Write the raw figures here.")
    args = p.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown or not cases:
        p.error(f"--cases: unknown case {', '.join(map(repr, unknown))}; known: {', '.join(CASES)}"
                if unknown else "--cases: no case given")  # fmt: skip
    args.cases = [c for c in CASES if c in cases]
    return args


def write_config(data_plane: bool) -> Path:
    """The RTO bench's fleet, plus consecutive free HTTP ports for the stack's two worker processes."""
    path = rto_fleet.write_bench_config(interval_s=10, threshold=3)
    data = yaml.safe_load(path.read_text())
    data["traffic"]["global"].update(fast_path=data_plane, health_checks=data_plane)
    for _ in range(50):  # bounded: two consecutive free ports
        (first,) = rto_fleet._free_ports(1)
        if first < 65535 and port_bindable(first + 1):
            data["devstack"]["worker_http_port"] = first
            break
    else:
        raise RuntimeError("no two consecutive free ports for the workers")
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


async def users(cfg: FleetConfig, rps: float, until: list[float], sent: list[tuple[float, bool]]) -> None:
    """Open-loop 1-token completions at `rps` until `until[0]` (which the caller may bring forward once
    it knows t0): at most rps x duration requests, each bounded in time."""
    url = cfg.traffic.global_endpoint.rstrip("/") + "/v1/completions"
    body = readiness.completion_body(cfg)
    pending: set[asyncio.Task[None]] = set()

    async def one(client: httpx.AsyncClient, at: float) -> None:
        try:
            ok = (await client.post(url, json=body)).status_code == 200
        except httpx.HTTPError:
            ok = False
        sent.append((at, ok))

    limits = httpx.Limits(max_connections=int(rps * REQUEST_TIMEOUT_S) + 1)
    async with httpx.AsyncClient(timeout=REQUEST_TIMEOUT_S, limits=limits) as client:
        next_at = time.monotonic()
        while next_at < until[0]:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            task = asyncio.create_task(one(client, next_at))
            pending.add(task)
            task.add_done_callback(pending.discard)
            next_at += 1 / rps
        if pending:
            await asyncio.wait(pending, timeout=REQUEST_TIMEOUT_S + 1)


def stop(cfg: FleetConfig, component: str) -> list[str]:
    """The primary's admin API stops Temporal or its worker (SIGTERM, then SIGKILL: seconds, bounded)."""
    url = (cfg.region(PRIMARY).devstack_admin_url or "").rstrip("/") + "/faults/control-plane"
    resp = httpx.post(url, json={"action": "stop", "component": component}, timeout=STOP_BOUND_S)
    resp.raise_for_status()
    return list(resp.json()["affected"])


def reset(cfg: FleetConfig) -> None:
    """The primary's faults cleared first, with the time its admin API takes to start Temporal and the
    worker again; then the RTO bench's reset (weights, replicas, every region serving)."""
    url = (cfg.region(PRIMARY).devstack_admin_url or "").rstrip("/") + "/faults/clear"
    httpx.post(url, timeout=CLEAR_TIMEOUT_S).raise_for_status()
    rto_fleet.reset_fleet(cfg)


async def fresh_monitor(cfg: FleetConfig) -> None:
    """No operation left from the last case, configured weights, and a new monitor seeing every region HEALTHY."""
    client = await connect(cfg)
    await _stop_monitor(client, cfg)
    await rto_fleet.wait_no_operations(client, cfg, 60)
    await asyncio.to_thread(reset, cfg)  # a failover of the last case moved the weights
    await start_monitor(client, cfg)
    await _monitor_ready(client, cfg, 90)


async def run_case(cfg: FleetConfig, case: str, args: argparse.Namespace) -> dict[str, Any]:
    """Reset, load, control plane stopped as the case says, the primary killed at t0, measure the window."""
    await asyncio.to_thread(reset, cfg)  # also starts the control plane the last case stopped
    await fresh_monitor(cfg)
    sent: list[tuple[float, bool]] = []
    # The window is measured from t0, after the stops (a process takes up to 10 s to stop): until then,
    # the load's end is bounded by STOP_BOUND_S.
    until = [time.monotonic() + args.warmup_s + STOP_BOUND_S + args.window_s]
    load = asyncio.create_task(users(cfg, args.rps, until, sent))
    stopped: list[str] = []
    try:
        await asyncio.sleep(args.warmup_s)
        for component in STOPPED[case]:
            stopped += await asyncio.to_thread(stop, cfg, component)
        t0 = time.monotonic()
        until[0] = t0 + args.window_s
        await asyncio.to_thread(rto_fleet._admin, cfg, PRIMARY, "/faults/gateway", {"action": "kill"})
        await asyncio.to_thread(
            rto_fleet._admin,
            cfg,
            PRIMARY,
            "/faults/replicas",
            {"action": "kill", "track": "stable", "stay_down": True},
        )
        await load
    finally:
        load.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await load
    weights = await asyncio.to_thread(global_traffic(cfg).get_weights)
    return {"case": case, "stopped": stopped, "t0": t0, "weights_at_end": weights,
            "requests": [(round(at - t0, 3), ok) for at, ok in sent]}  # fmt: skip


def per_second(rec: dict[str, Any], window_s: float) -> list[tuple[int, int]]:
    """(failed, sent) for each second after t0, by the time a request was sent."""
    rows = [[0, 0] for _ in range(int(window_s))]
    for at, ok in rec["requests"]:
        if 0 <= at < len(rows):
            rows[int(at)][1] += 1
            rows[int(at)][0] += not ok
    return [(f, n) for f, n in rows]


def render(records: list[dict[str, Any]], args: argparse.Namespace) -> str:
    cols = {r["case"]: per_second(r, args.window_s) for r in records}
    head = (
        f"Control-plane loss bench: {PRIMARY} (weight 60) dies at t=0 (gateway and replicas killed), "
        f"{args.rps:g} rps of 1-token completions through the global endpoint, fast path and health checks "
        f"{'on (as shipped)' if args.data_plane == 'on' else 'off'}; users' error share per second (failed/sent)"
    )
    width = max(len(c) for c in cols) + 2
    lines = [head, "", "  s  " + "".join(f"{c:>{width}}" for c in cols)]
    for s in range(int(args.window_s)):
        cells = "".join(
            f"{(f'{100 * f / n:.0f}% ({f}/{n})' if n else '-'):>{width}}"
            for f, n in (cols[c][s] for c in cols)
        )
        lines.append(f"{s:>3}  {cells}")
    lines.append("")
    for r in records:
        rows = cols[r["case"]]
        failed, total = sum(f for f, _ in rows), sum(n for _, n in rows)
        last = max((s for s, (f, _) in enumerate(rows) if f), default=None)
        lines.append(
            f"{r['case']:<{width}} errors {failed}/{total} ({100 * failed / max(total, 1):.1f}%), "
            f"last error in second {last if last is not None else 'none'}, "
            f"stopped {', '.join(r['stopped']) or 'nothing'}, global weights at the end {r['weights_at_end']}"
        )
    return "\n".join(lines)


async def run_all(cfg: FleetConfig, args: argparse.Namespace, records: list[dict[str, Any]]) -> None:
    for case in args.cases:
        rec = await run_case(cfg, case, args)
        records.append(rec)
        rows = per_second(rec, args.window_s)
        print(f"[{case}] {sum(f for f, _ in rows)}/{sum(n for _, n in rows)} failed after t0, "
              f"weights at the end {rec['weights_at_end']}", flush=True)  # fmt: skip
    await asyncio.to_thread(reset, cfg)  # the control plane back before the stack stops


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rto_fleet.quiet_temporal()
    cfg_path = write_config(args.data_plane == "on")
    cfg = rto_fleet.load(cfg_path)
    records: list[dict[str, Any]] = []
    rc = 0
    try:
        print(f"bringing the dev stack up with its workers (config {cfg_path}) ...", flush=True)
        rto_fleet.stack.up(cfg, cfg_path, workers=True)
        asyncio.run(run_all(cfg, args, records))
    except KeyboardInterrupt:
        rc = 130
        print("interrupted: reporting the cases done so far", file=sys.stderr)
    except rto_fleet.stack.StackError as exc:
        print(f"dev stack did not come up: {exc}\n--- {exc.component} log ---\n{exc.log}", file=sys.stderr)
        rc = 1
    except (TimeoutError, RuntimeError, httpx.HTTPError) as exc:
        print(f"bench failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        rc = 1
    finally:
        rto_fleet.stack_down(cfg)
    if records:
        if args.json:
            args.json.write_text(json.dumps({"rps": args.rps, "window_s": args.window_s, "cases": records}))
        print()
        print(render(records, args))
    if rc == 0 and len(records) == len(args.cases):
        shutil.rmtree(cfg_path.parent, ignore_errors=True)
        return 0
    print(f"stack logs kept in {cfg_path.parent}/s/logs", file=sys.stderr)
    return rc or 1


if __name__ == "__main__":
    sys.exit(main())
