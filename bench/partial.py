"""Partial-failure benchmark: half of us-west-1's replicas lost under load, three answers side by side.

    python bench/partial.py [--minutes 3] [--load-fraction 0.7] [--arms none,failover,rebalance]
                            [--seed N] [--json out.json]

One private dev stack on free ports (bench/rto_fleet.py), the reference fleet (us-west-1 60 /
us-east-1 40, two replicas each). Users send an open-loop (Poisson) stream of non-streamed 512-token
completions through the global endpoint at `--load-fraction` of the fleet's capacity: replicas ×
workload.max_concurrency_per_replica (set to fleetsim's max_num_seqs) over one request's service
time. Then one of us-west-1's two replicas is killed and kept down, and for `--minutes` each arm
answers it (bench/partial_report.py ARM_TEXT). The fleet is reset between arms (faults cleared,
weights 60/40, replicas back, no request waiting). What is printed comes from the servers, read
every second (bench/partial_fleet.py): TTFT from every replica's
vLLM histogram, waiting requests from vllm:num_requests_waiting.
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

if __package__ in (None, ""):  # run as `python bench/partial.py`: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from temporalio.client import Client

from bench import rto_fleet
from bench.args import BenchParser
from bench.partial_fleet import open_loop, read_fleet, wait_drained
from bench.partial_report import ARM_TEXT, ARMS, Arm, ArmRecord, Read, Request, format_table, summarise
from bench.rto import _decisions, _monitor_ready, _stop_monitor, policy_config, with_objective
from drctl.cli.monitor import start_monitor
from drctl.client.operations import start_operation
from drctl.config.schema import FleetConfig
from drctl.devstack.fleetsim import FleetsimSettings
from drctl.devstack.fleetsim_openai import MAX_TOKENS_CAP
from drctl.models.failover import FailoverInput, FailoverResult
from drctl.models.fleet_spec import FleetSpec
from drctl.models.slo import SloObjective

BASE_TTFT_MS = 150.0  # as bench/rto.py: the objective is 4x this (600 ms)
WARMUP_S = 15.0  # load before the fault (at most half the window), so it meets a fleet in its steady state
SOURCE, TARGET = "us-west-1", "us-east-1"
DRAIN_S = 300.0  # bound on the wait for the previous arm's queue to drain


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = BenchParser(prog="bench/partial.py", description=__doc__.split("\n")[0])
    p.number("--minutes", 3.0, "Window after the fault, per arm", "(0, 30]")
    p.number(
        "--load-fraction",
        0.7,
        "User load as a share of the fleet's capacity",
        "(0, 1]",
        why="the load must stay bounded on a shared machine",
    )
    p.number(
        "--spare-replicas",
        2,
        f"Replicas each region but {SOURCE} may grow by (max_replicas - replicas): the GPUs a "
        f"survivor's HPA can still get; {SOURCE} has none (its node is lost and no spare exists); "
        "0: no spare GPUs anywhere",
        "[0, 8]",
    )
    p.add_argument("--arms", default=",".join(ARMS), help=f"Comma list of {', '.join(ARMS)} (default: all).")
    p.add_argument("--seed", type=int, default=None, help="Seed of the users' arrival times.")
    p.add_argument("--json", type=Path, default=None, help="Write the raw figures here.")
    args = p.parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms:
        p.error(
            f"--arms: unknown arm {', '.join(map(repr, unknown))}; known: {', '.join(ARMS)}"
            if unknown
            else "--arms: no arm given"
        )
    args.arms = [a for a in ARMS if a in arms]
    return args


def bench_config(cfg: FleetConfig, spare_replicas: int = 2) -> FleetConfig:
    """The objective of bench/rto.py, a per-replica capacity equal to fleetsim's max_num_seqs, and
    `spare_replicas` of room to scale in every region but SOURCE.

    SOURCE loses a node and has no spare to replace it; the survivors' HPAs can still grow by
    `spare_replicas` (the GPUs a failover or a rebalance pre-scales onto). With 0, no region can
    add a replica, and the fleet left after the fault is over its usable capacity: no traffic
    policy can restore the objective then (docs/measurements.md shows that case too).
    """
    seqs = FleetsimSettings().max_num_seqs
    workload = cfg.workload.model_copy(update={"max_concurrency_per_replica": seqs})
    regions = [
        r.model_copy(update={"max_replicas": r.replicas + (0 if r.name == SOURCE else spare_replicas)})
        for r in cfg.regions
    ]
    return with_objective(cfg.model_copy(update={"workload": workload, "regions": regions}), BASE_TTFT_MS)


def capacity(cfg: FleetConfig, fraction: float) -> dict[str, float]:
    """The fleet's capacity and the load used: concurrency, and rps at one request's service time."""
    per = cfg.workload.max_concurrency_per_replica or FleetsimSettings().max_num_seqs
    replicas = sum(r.replicas for r in cfg.regions)
    service_s = (BASE_TTFT_MS + (MAX_TOKENS_CAP - 1) * FleetsimSettings().itl_ms) / 1000
    cap_rps = replicas * per / service_s
    return {
        "replicas": replicas,
        "per_replica": per,
        "service_s": round(service_s, 3),
        "capacity_concurrency": replicas * per,
        "capacity_rps": round(cap_rps, 2),
        "load_fraction": fraction,
        "load_rps": round(fraction * cap_rps, 2),
        "load_concurrency": round(fraction * replicas * per, 1),
    }


async def start_failover(client: Client, cfg: FleetConfig) -> Any:
    """The Failover workflow, started as `drctl failover --to us-east-1` starts it."""
    from workflows.failover import Failover

    inp = FailoverInput(spec=FleetSpec.from_config(cfg), target=TARGET)
    return await start_operation(
        client, cfg, Failover.run, inp, operation="failover", workflow_id=f"failover/{cfg.name}",
        target=TARGET, memo={"initiator": "bench/partial.py"},
    )  # fmt: skip


async def failover_figures(handle: Any) -> dict[str, object]:
    try:
        res: FailoverResult = await asyncio.wait_for(handle.result(), 60)
    except Exception as exc:  # noqa: BLE001 - a failed failover is a figure of this arm, not a crash
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    return {
        "status": res.status,
        "rto_s": res.rto_s,
        "slo_restored_s": res.slo_restored_s,
        "error": res.error,
    }


async def run_arm(
    client: Client, cfg: FleetConfig, arm: Arm, args: argparse.Namespace, rps: float
) -> ArmRecord:
    """Reset, load, fault at t0, answer as the arm does, read for the window; always stops what it started."""
    window_s = args.minutes * 60
    pcfg = policy_config(cfg, "drctl")  # the default monitor, rebalance automatic
    sent: list[tuple[float, float, bool, str | None]] = []
    reads: list[Read] = []
    rec = ArmRecord(arm=arm, window_s=window_s, reads=[], requests=[])
    load: asyncio.Task[None] | None = None
    t0 = time.monotonic()
    try:
        await asyncio.to_thread(rto_fleet.reset_fleet, cfg)
        await wait_drained(cfg, DRAIN_S)
        await rto_fleet.wait_probed_healthy(cfg, 60)
        await rto_fleet.wait_no_operations(client, cfg, 60)
        if arm == "rebalance":
            await start_monitor(client, pcfg)
            await _monitor_ready(client, pcfg, 60)
        seed = None if args.seed is None else args.seed + ARMS.index(arm)
        warmup_s = min(WARMUP_S, window_s / 2)
        load = asyncio.create_task(open_loop(cfg, rps, time.monotonic() + warmup_s + window_s, sent, seed))
        await asyncio.sleep(warmup_s)
        t0 = time.monotonic()
        await asyncio.to_thread(
            rto_fleet._admin, cfg, SOURCE, "/faults/replicas",
            {"action": "kill", "track": "stable", "count": 1, "stay_down": True},
        )  # fmt: skip
        handle = await start_failover(client, cfg) if arm == "failover" else None
        await read_fleet(cfg, t0, t0 + window_s, reads)
        if handle is not None:
            rec.failover = await failover_figures(handle)
    except (TimeoutError, RuntimeError, httpx.HTTPError) as exc:
        rec.error = f"{type(exc).__name__}: {exc}"
    finally:
        if load is not None:
            load.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await load
        if arm == "rebalance":
            rec.decisions = await _decisions(client, pcfg)
            await _stop_monitor(client, pcfg)
    rec.reads = reads
    rec.requests = [
        Request(sent_s=round(a - t0, 3), done_s=round(b - t0, 3), ok=ok, region=rg) for a, b, ok, rg in sent
    ]
    return rec


async def run_all(cfg: FleetConfig, args: argparse.Namespace, rps: float, records: list[ArmRecord]) -> None:
    async with rto_fleet.running_worker(cfg) as client:
        for arm in args.arms:
            rec = await run_arm(client, cfg, arm, args, rps)
            records.append(rec)
            s = summarise(rec, SloObjective.from_config(cfg.objectives.slo))
            print(
                f"[{arm}] {s.sent_rps:g} rps sent, {s.requests} requests answered or failed, "
                f"TTFT p99 {s.ttft_p99_ms} ms, restored "
                f"{s.restored_s if s.restored_s is not None else 'never'}"
                + (f", failover {rec.failover}" if rec.failover else "")
                + (f", error: {rec.error}" if rec.error else ""),
                flush=True,
            )
            for line in rec.decisions:
                print(f"    {line}", flush=True)


def render(cap: dict[str, float], cfg: FleetConfig, records: list[ArmRecord], minutes: float) -> str:
    obj = SloObjective.from_config(cfg.objectives.slo)
    head = (
        f"Partial-failure benchmark: 1 of 2 {SOURCE} replicas killed and kept down, {minutes:g} min per arm\n"
        f"capacity {cap['replicas']:g} replicas x {cap['per_replica']:g} concurrent (max_num_seqs) = "
        f"{cap['capacity_concurrency']:g}, {cap['service_s']:g} s a request: {cap['capacity_rps']:g} rps; "
        f"load {cap['load_fraction']:g} of it: {cap['load_rps']:g} rps open-loop, "
        f"~{cap['load_concurrency']:g} concurrent; TTFT in ms from the replicas' histograms"
    )
    legend = "\n".join(f"  {a:<9} {ARM_TEXT[a]}" for a in ARMS if any(r.arm == a for r in records))
    table = format_table([summarise(r, obj) for r in records], obj)
    return f"{head}\n{legend}\n\n{table}"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rto_fleet.quiet_temporal()
    cfg_path = rto_fleet.write_bench_config(interval_s=10, threshold=3)
    cfg = bench_config(rto_fleet.load(cfg_path), args.spare_replicas)
    cap = capacity(cfg, args.load_fraction)
    print(
        f"capacity {cap['capacity_concurrency']:g} concurrent ({cap['capacity_rps']:g} rps); "
        f"load {cap['load_rps']:g} rps (~{cap['load_concurrency']:g} concurrent); "
        f"{args.spare_replicas} spare replicas in each region but {SOURCE}",
        flush=True,
    )
    records: list[ArmRecord] = []
    interrupted = False
    try:
        print(f"bringing the dev stack up (config {cfg_path}) ...", flush=True)
        rto_fleet.stack_up(cfg, cfg_path, BASE_TTFT_MS)
        asyncio.run(run_all(cfg, args, cap["load_rps"], records))
    except (KeyboardInterrupt, rto_fleet.WorkerStopped) as exc:
        interrupted = True
        print(f"interrupted ({exc or 'Ctrl-C'}): reporting the arms done so far", file=sys.stderr)
    except rto_fleet.stack.StackError as exc:
        print(f"dev stack did not come up: {exc}\n--- {exc.component} log ---\n{exc.log}", file=sys.stderr)
        return 1
    finally:
        rto_fleet.stack_down(cfg)
    if records:
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "capacity": cap,
                        "slo": cfg.objectives.slo.model_dump(),
                        "arms": [r.model_dump() for r in records],
                    }
                )
            )
        print()
        print(render(cap, cfg, records, args.minutes))
    failed = [r for r in records if r.error]
    rc = 130 if interrupted else (1 if failed or not records else 0)
    if rc == 0:
        shutil.rmtree(cfg_path.parent, ignore_errors=True)
    else:
        print(f"stack logs kept in {cfg_path.parent}/s/logs", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
