"""Temporal history cost of the monitor: the round-per-probe loop against the watcher, side by side.

    .venv/bin/python bench/history_cost.py --minutes 3

Brings up its own dev stack on free ports (bench/rto_fleet.py), runs one drctl worker and two
monitors of the same fleet at steady state (no faults), for `--minutes` each, at the same time: one
with `health.watcher` off (today's loop), one with it on. Then it reads both histories with the
Temporal client and prints events and serialized bytes per region-hour, counted over the steady
window (after `--warmup-s`, so the start-up events do not count) and over the whole run.
The issue's target for the watcher is at most 200 events per region-hour.

With the watcher, a quiet fleet writes events only at its checkpoint (health.watcher_checkpoint_s,
600 s by default): a run shorter than that sees none in its steady window. `--checkpoint-s` runs
the checkpoint more often, so a few minutes show what each costs (a shorter one costs more).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

if __package__ in (None, ""):  # run as `python bench/history_cost.py`: make the repo root importable
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))

from temporalio.client import Client, WorkflowHandle

from bench import rto_fleet
from bench.args import BenchParser
from drctl.cli.monitor import start_monitor
from drctl.config.schema import FleetConfig

TARGET_PER_REGION_HOUR = 200


@dataclass
class Cost:
    label: str
    regions: int
    events: int
    bytes: int
    seconds: float
    steady_events: int
    steady_bytes: int
    steady_seconds: float

    def per_region_hour(self, n: float, seconds: float) -> float:
        return n * 3600.0 / (self.regions * seconds) if seconds > 0 and self.regions else 0.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = BenchParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.number("--minutes", 3.0, "How long each monitor runs", "(0, 60]")
    p.number("--interval-s", 10.0, "health.interval_s, the product's", "(2, 600]")
    p.number(
        "--checkpoint-s", 600.0, "health.watcher_checkpoint_s for the watcher, the product's", "[10, 3600]"
    )
    p.add_argument(
        "--warmup-s", type=float, default=30.0, help="Start-up left out of the steady window (default 30)."
    )
    args = p.parse_args(argv)
    if not 0 <= args.warmup_s < args.minutes * 60:
        p.error("--warmup-s must be at least 0 and shorter than the run")
    return args


def measure(
    label: str,
    regions: int,
    events: list[tuple[datetime, int]],
    start: datetime,
    end: datetime,
    warmup_s: float,
) -> Cost:
    """The cost of one history: (event time, serialized size) per event, within [start, end]."""
    steady_from = start + timedelta(seconds=warmup_s)
    steady = [size for at, size in events if steady_from <= at <= end]
    return Cost(
        label=label,
        regions=regions,
        events=len(events),
        bytes=sum(size for _, size in events),
        seconds=(end - start).total_seconds(),
        steady_events=len(steady),
        steady_bytes=sum(steady),
        steady_seconds=(end - steady_from).total_seconds(),
    )


def render(costs: list[Cost], minutes: float, interval_s: float, checkpoint_s: float) -> str:
    head = (
        f"monitor history cost, {minutes:g} min each, {costs[0].regions} regions, interval {interval_s:g}s, "
        f"watcher checkpoint {checkpoint_s:g}s; per region-hour (target <= {TARGET_PER_REGION_HOUR} events)"
    )
    rows = [
        f"{'monitor':<22} {'events/region-h':>16} {'bytes/region-h':>15} {'whole run: events':>18} "
        f"{'events/region-h':>16} {'bytes/region-h':>15}"
    ]
    for c in costs:
        rows.append(
            f"{c.label:<22} {c.per_region_hour(c.steady_events, c.steady_seconds):>16.0f} "
            f"{c.per_region_hour(c.steady_bytes, c.steady_seconds):>15.0f} {c.events:>18d} "
            f"{c.per_region_hour(c.events, c.seconds):>16.0f} {c.per_region_hour(c.bytes, c.seconds):>15.0f}"
        )
    return head + "\n  steady window: after the warm-up; whole run: start-up included\n" + "\n".join(rows)


async def _history(handle: WorkflowHandle[Any, Any]) -> list[tuple[datetime, int]]:
    return [
        (e.event_time.ToDatetime().replace(tzinfo=None), e.ByteSize())
        async for e in handle.fetch_history_events()
    ]


async def _run(cfg: FleetConfig, args: argparse.Namespace) -> list[Cost]:
    old = cfg.model_copy(
        update={"name": f"{cfg.name}-rounds", "health": cfg.health.model_copy(update={"watcher": False})}
    )
    new = cfg.model_copy(
        update={
            "name": f"{cfg.name}-watcher",
            "health": cfg.health.model_copy(
                update={"watcher": True, "watcher_checkpoint_s": args.checkpoint_s}
            ),
        }
    )
    async with rto_fleet.running_worker(cfg) as client:
        handles = [await _start(client, c) for c in (old, new)]
        await asyncio.sleep(args.minutes * 60)
        costs = []
        for label, c, (handle, start) in zip(
            ("rounds (watcher off)", "watcher"), (old, new), handles, strict=True
        ):
            end = datetime.now(UTC).replace(tzinfo=None)  # the history's timestamps are naive UTC
            costs.append(measure(label, len(c.regions), await _history(handle), start, end, args.warmup_s))
            await handle.terminate("bench done")
    return costs


async def _start(client: Client, cfg: FleetConfig) -> tuple[WorkflowHandle[Any, Any], datetime]:
    handle, _ = await start_monitor(client, cfg)
    desc = await handle.describe()
    return handle, desc.start_time.replace(tzinfo=None)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rto_fleet.quiet_temporal()
    cfg_path = rto_fleet.write_bench_config(args.interval_s, 3)
    cfg = rto_fleet.load(cfg_path)
    try:
        print(f"bringing the dev stack up (config {cfg_path}) ...", flush=True)
        rto_fleet.stack.up(cfg, cfg_path)
        costs = asyncio.run(_run(cfg, args))
    except rto_fleet.stack.StackError as exc:
        print(f"dev stack did not come up: {exc}\n--- {exc.component} log ---\n{exc.log}", file=sys.stderr)
        return 1
    finally:
        rto_fleet.stack_down(cfg)
    print(render(costs, args.minutes, args.interval_s, args.checkpoint_s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
