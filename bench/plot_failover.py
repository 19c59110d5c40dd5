"""Plot one real failover: global weights and the client error rate over time.

    python bench/plot_failover.py --out docs/failover.png --samples bench/samples/failover.json
    python bench/plot_failover.py --from bench/samples/failover.json --out docs/failover.png

The first form runs one trial on a private dev stack, as bench/rto.py does: the FleetMonitor
watches, every stable replica of us-west-1 is killed under open-loop load through the global
endpoint, and the automatic failover moves traffic to us-east-1. Global weights are read from
the global tier every 100 ms. The second form re-plots saved samples without any stack.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/plot_failover.py`: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from activities.chaos import _load as run_load
from bench import rto_fleet
from bench.rto import _await_failover, _monitor_ready, _stop_monitor
from drctl.cli.monitor import start_monitor
from drctl.config.schema import FleetConfig
from drctl.models.drill import LoadSample
from drctl.providers.auth import auth_headers
from drctl.providers.traffic_factory import global_traffic

RPS = 20.0
BEFORE_S, AFTER_S = 4.0, 5.0
BIN_S = 0.5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="bench/plot_failover.py", description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, required=True, help="PNG to write.")
    p.add_argument("--samples", type=Path, default=None, help="Also save the run's raw samples here (JSON).")
    p.add_argument("--from", dest="source", type=Path, default=None, help="Plot saved samples; run nothing.")
    p.add_argument("--interval-s", type=float, default=10.0, help="Monitor probe interval (default 10).")
    return p.parse_args(argv)


async def _sample_weights(cfg: FleetConfig, out: list[dict[str, Any]]) -> None:
    tier = global_traffic(cfg)
    while True:
        w = await asyncio.to_thread(tier.get_weights)
        out.append({"t": datetime.now(UTC).isoformat(), "weights": w})
        await asyncio.sleep(0.1)


async def run_trial(cfg: FleetConfig) -> dict[str, Any]:
    source = cfg.regions[0].name
    samples: list[LoadSample] = []
    weights: list[dict[str, Any]] = []
    async with rto_fleet.running_worker(cfg) as client:
        await asyncio.to_thread(rto_fleet.reset_fleet, cfg)
        await rto_fleet.wait_probed_healthy(cfg, 60)
        await start_monitor(client, cfg)
        try:
            await _monitor_ready(client, cfg, 60)
            load = asyncio.create_task(
                run_load(cfg, RPS, time.monotonic() + 120, samples, auth_headers(cfg), 10.0)
            )
            sampler = asyncio.create_task(_sample_weights(cfg, weights))
            try:
                await asyncio.sleep(BEFORE_S)
                fault_at = datetime.now(UTC)
                await asyncio.to_thread(rto_fleet.inject, cfg, source, "down", 150.0)
                res, _ = await _await_failover(client, cfg, fault_at, 90)
                await asyncio.sleep(AFTER_S)
            finally:
                for task in (load, sampler):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        finally:
            await _stop_monitor(client, cfg)
    return {
        "fault_at": fault_at.isoformat(),
        "source": source,
        "target": res.target,
        "status": res.status,
        "failover_started_at": res.started_at.isoformat(),
        "fault_detected_at": res.fault_at.isoformat(),
        "shifted_at": res.shifted_at.isoformat() if res.shifted_at else None,
        "verified_at": res.verified_at.isoformat() if res.verified_at else None,
        "rto_s": res.rto_s,
        "rto_target_s": cfg.objectives.rto_target_s,
        "interval_s": cfg.health.interval_s,
        "load": [s.model_dump(mode="json") for s in samples],
        "weights": weights,
    }


def _secs(iso: str | None, t0: datetime) -> float | None:
    return None if iso is None else (datetime.fromisoformat(iso) - t0).total_seconds()


def plot(data: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    t0 = datetime.fromisoformat(data["fault_at"])
    fig, (top, bottom) = plt.subplots(
        2, 1, sharex=True, figsize=(9, 5.5), gridspec_kw={"height_ratios": [1, 1]}
    )
    regions = sorted({r for w in data["weights"] for r in w["weights"]})
    wt = [_secs(w["t"], t0) for w in data["weights"]]
    for r in regions:
        top.step(
            wt, [w["weights"].get(r, 0) for w in data["weights"]], where="post", label=f"{r} weight", lw=2
        )
    top.set_ylabel("global weight")
    top.legend(loc="center right")
    # Error rate and served-by share per bin, from the load's own samples.
    load = [((datetime.fromisoformat(s["t"]) - t0).total_seconds(), s) for s in data["load"]]
    bins: dict[int, list[dict[str, Any]]] = {}
    for t, s in load:
        bins.setdefault(math.floor(t / BIN_S), []).append(s)  # bins aligned on the fault: [0, 0.5) ...
    xs = [(k + 0.5) * BIN_S for k in sorted(bins)]
    err = [100 * sum(not s["ok"] for s in bins[k]) / len(bins[k]) for k in sorted(bins)]
    bottom.bar(xs, err, width=BIN_S * 0.9, color="tab:red", label="requests failing (%)")
    bottom.set_ylabel(f"errors, % per {BIN_S:g} s")
    bottom.set_ylim(0, 105)
    bottom.set_xlabel("seconds since the fault (every stable replica of the source region killed)")
    marks = [
        ("fault", data["fault_at"], "black"),
        ("failover started", data["failover_started_at"], "tab:orange"),
        ("weights shifted", data["shifted_at"], "tab:blue"),
        ("verified", data["verified_at"], "tab:green"),
    ]
    for label, iso, color in marks:
        x = _secs(iso, t0)
        if x is not None:
            for ax in (top, bottom):
                ax.axvline(x, color=color, ls="--", lw=1)
            top.annotate(
                label, (x, 1.02), xycoords=("data", "axes fraction"), rotation=30, fontsize=8, color=color
            )
    bottom.legend(loc="upper right")
    # From the injected fault, which only a benchmark knows; the workflow's own rto_s starts at the
    # first failed probe (the earliest moment drctl can know of the fault).
    rto = _secs(data["verified_at"], t0)
    fig.suptitle(
        f"Automatic failover {data['source']} → {data['target']}: verified {rto:.1f} s after the fault "
        f"(workflow RTO {data['rto_s']:.1f} s from the first failed probe; target {data['rto_target_s']:g} s)\n"
        f"probe every {data['interval_s']:g} s, {RPS:g} rps open-loop load through the global endpoint",
        fontsize=9,
        y=0.995,
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.source:
        try:
            data = json.loads(args.source.read_text())
        except (OSError, ValueError) as exc:
            print(f"{args.source}: cannot read samples ({exc})", file=sys.stderr)
            return 2
        plot(data, args.out)
        print(f"wrote {args.out}")
        return 0
    logging.getLogger("temporalio").setLevel(logging.ERROR)
    cfg_path = rto_fleet.write_bench_config(args.interval_s, 3)
    cfg = rto_fleet.load(cfg_path)
    try:
        print(f"bringing the dev stack up (config {cfg_path}) ...", flush=True)
        rto_fleet.stack_up(cfg, cfg_path, 150.0)
        data = asyncio.run(run_trial(cfg))
    finally:
        rto_fleet.stack_down(cfg)
    if args.samples:
        args.samples.parent.mkdir(parents=True, exist_ok=True)
        args.samples.write_text(json.dumps(data, indent=1))
    plot(data, args.out)
    print(f"failover {data['status']}, RTO {data['rto_s']} s; wrote {args.out}")
    return 0 if data["status"] == "succeeded" else 1


if __name__ == "__main__":
    sys.exit(main())
