"""RPO benchmark: data lost when the primary region dies while the fleet writes state.

    python bench/rpo.py [--trials 3] [--intervals 2,5] [--rate 10] [--json out.json] [--config FILE]

For each replication interval, each trial: start `replicate/<fleet>` on the state bucket only, write
objects into the primary's (us-west-1) state bucket at a steady rate, kill the primary region at a
random moment after two intervals (its replicas, and drctl's link to its S3 endpoint), take what the
standby's bucket holds at that moment, fail over in emergency mode, and count the objects written
before the fault that the target lacks. The data-loss window is the fault time minus the write time of the newest
object the target has. p50/p95 over trials are printed against `objectives.rpo_target_s`, next to
the exposure the failover itself recorded from its lag check.

Without --config it brings up a private dev stack on free ports (as bench/rto.py does); with
--config it uses a running dev stack and runs its own worker on fresh task queues.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/rpo.py`: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml
from pydantic import BaseModel
from temporalio.service import RPCError

from bench import rto_fleet
from bench.args import BOUNDED_LOAD, BenchParser
from bench.rto_report import percentile
from drctl.cli.replicate import replicate_id, start_replication
from drctl.client.operations import start_operation
from drctl.config.schema import FleetConfig, load_config
from drctl.devstack import stack
from drctl.models.failover import FailoverInput, FailoverResult
from drctl.models.fleet_spec import FleetSpec
from drctl.models.rpo import ReplicateStatus
from drctl.providers.aws import client as aws_client
from workflows.failover import Failover

SOURCE, TARGET = "us-west-1", "us-east-1"
SOURCE_BUCKET, TARGET_BUCKET = "drctl-state-us-west-1", "drctl-state-us-east-1"
STATE: dict[str, Any] = {
    "name": "state",
    "source": {"region": SOURCE, "bucket": SOURCE_BUCKET},
    "replicas": [{"region": TARGET, "bucket": TARGET_BUCKET}],
    "mode": "copy",
}


class SourceLink:
    """A TCP forwarder between drctl (replication, the failover's lag check) and the source region's
    S3 endpoint. Cutting it is the region outage as drctl sees it: the source's store unreachable,
    while the bench itself still reads both buckets directly to count what was lost."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.removeprefix("http://").partition(":")
        self.upstream = (host, int(port or 80))
        self.port = 0
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def open(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]

    def cut(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        for w in list(self.writers):
            w.close()
        self.writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.close()
            return
        self.writers |= {writer, up_w}
        await asyncio.gather(self._pipe(reader, up_w), self._pipe(up_r, writer), return_exceptions=True)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        finally:
            self.writers.discard(dst)
            dst.close()


class Trial(BaseModel):
    interval_s: float
    trial: int
    written: int
    lost: int
    window_s: float
    exposure_s: float | None
    exposure_objects: int | None
    exposure_detail: str = ""
    failover: str


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = BenchParser(prog="bench/rpo.py", description=__doc__.split("\n")[0])
    p.number("--trials", 3, "Faults per replication interval", ">= 1")
    p.add_argument("--intervals", default="2,5", help="Comma list of replication intervals, s (default 2,5).")
    p.number("--rate", 10.0, "Objects written per second", "(0, 50]", why=BOUNDED_LOAD)
    p.add_argument(
        "--config", type=Path, default=None, help="Use this running dev stack instead of a private one."
    )
    p.add_argument("--json", type=Path, default=None, help="Write the trial records here.")
    p.add_argument("--seed", type=int, default=None, help="Seed of the random fault moments.")
    args = p.parse_args(argv)
    try:
        args.intervals = [float(x) for x in args.intervals.split(",") if x.strip()]
    except ValueError:
        p.error(f"--intervals {args.intervals!r}: expected numbers like 2,5")
    if not args.intervals or any(i <= 0 for i in args.intervals):
        p.error("--intervals must be positive seconds")
    return args


def loss(writes: list[tuple[str, datetime]], held: set[str], fault_at: datetime) -> tuple[int, float]:
    """(objects written before the fault that the target lacks, data-loss window in seconds)."""
    before = [(k, t) for k, t in writes if t <= fault_at]
    lost = sum(1 for k, _ in before if k not in held)
    newest = max((t for k, t in before if k in held), default=None)
    if newest is None:
        return lost, round((fault_at - before[0][1]).total_seconds(), 3) if before else 0.0
    return lost, round((fault_at - newest).total_seconds(), 3)


def bench_config(base: Path, interval_s: float, link_port: int) -> FleetConfig:
    """The stack's config with only the state bucket replicated, every interval_s, on fresh queues,
    and the source region's S3 endpoint reached through the bench's cuttable link."""
    data = yaml.safe_load(base.read_text())
    tag = uuid.uuid4().hex[:6]
    data["data"] = {
        "buckets": [{**STATE, "interval_s": interval_s}],
        "endpoints": {SOURCE: {"endpoint_url": f"http://127.0.0.1:{link_port}"}},
    }
    data.setdefault("temporal", {})["task_queue"] = f"drctl-rpo-{tag}"
    for r in data["regions"]:
        r["task_queue"] = f"drctl-rpo-{tag}-{r['name']}"
    path = base.parent / f"fleet-rpo-{tag}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_config(path)


async def _writer(
    cfg: FleetConfig, prefix: str, rate: float, stop: asyncio.Event, writes: list[tuple[str, datetime]]
) -> None:
    s3 = aws_client(cfg, "s3")
    n, start = 0, time.monotonic()
    while not stop.is_set():
        key = f"{prefix}/obj-{n:06d}"
        await asyncio.to_thread(s3.put_object, Bucket=SOURCE_BUCKET, Key=key, Body=b"x" * 512)
        writes.append((key, datetime.now(UTC)))  # durable in the source from here on
        n += 1
        await asyncio.sleep(max(0.0, start + n / rate - time.monotonic()))


def _held(cfg: FleetConfig, prefix: str) -> set[str]:
    s3 = aws_client(cfg, "s3")
    keys: set[str] = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=TARGET_BUCKET, Prefix=prefix):
        keys |= {o["Key"] for o in page.get("Contents", [])}
    return keys


async def _first_run(client: Any, cfg: FleetConfig, timeout_s: float = 60.0) -> None:
    """Until replication has completed a run: the fault must hit a replication in its steady state."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(RPCError):
            st = await client.get_workflow_handle(replicate_id(cfg)).query(
                "status", result_type=ReplicateStatus
            )
            if st.total_runs >= 1:
                return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"no replication run completed within {timeout_s:g} s")


def _forget(cfg: FleetConfig, prefix: str) -> None:
    """Delete a trial's objects from both buckets: on a shared stack, unreplicated leftovers would be
    replication lag that refuses every later normal failover."""
    s3 = aws_client(cfg, "s3")
    for bucket in (SOURCE_BUCKET, TARGET_BUCKET):
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                s3.delete_objects(Bucket=bucket, Delete={"Objects": keys})


async def trial(
    cfg: FleetConfig,
    client: Any,
    link: SourceLink,
    interval_s: float,
    n: int,
    rate: float,
    rng: random.Random,
) -> Trial:
    prefix = f"rpo-{uuid.uuid4().hex[:8]}"
    await link.open()
    await start_replication(client, cfg)
    stop = asyncio.Event()
    writes: list[tuple[str, datetime]] = []
    writer = asyncio.create_task(_writer(cfg, prefix, rate, stop, writes))
    try:
        await _first_run(client, cfg)
        await asyncio.sleep(2 * interval_s + rng.uniform(0, interval_s))
        rto_fleet.inject(cfg, SOURCE, "down", 0.0)
        link.cut()
        fault_at = datetime.now(UTC)
        stop.set()
        # The source region is gone: what the standby holds now is all it will ever get from it.
        held = await asyncio.to_thread(_held, cfg, prefix)
    finally:
        stop.set()
        await writer
    lost, window = loss(writes, held, fault_at)
    handle = await start_operation(
        client,
        cfg,
        Failover.run,
        FailoverInput(
            spec=FleetSpec.from_config(cfg),
            target=TARGET,
            source=SOURCE,
            emergency=True,
            fault_at=fault_at,
            initiator="bench/rpo",
        ),
        operation="failover",
        workflow_id=f"failover/{cfg.name}",
        target=TARGET,
    )
    res: FailoverResult = await asyncio.wait_for(handle.result(), 120)
    await client.get_workflow_handle(replicate_id(cfg)).terminate("bench: trial over")
    await asyncio.to_thread(_forget, cfg, prefix)
    d = res.data_loss
    return Trial(
        interval_s=interval_s,
        trial=n,
        written=sum(1 for _, t in writes if t <= fault_at),
        lost=lost,
        window_s=window,
        exposure_s=d.lag_s if d else None,
        exposure_objects=d.objects if d else None,
        exposure_detail=d.detail if d else "",
        failover=res.status,
    )


def format_table(trials: list[Trial], rpo_target_s: float) -> str:
    met_head = f"met<={rpo_target_s:g}s"
    head = (
        f"{'interval s':<10}  {'n':>2}  {'lost p50/p95':>12}  {'window s p50/p95':>16}  "
        f"{met_head:>8}  {'exposure s p50':>14}"
    )
    lines = [head, "-" * len(head)]
    for interval in sorted({t.interval_s for t in trials}):
        ts = [t for t in trials if t.interval_s == interval]
        lost = [float(t.lost) for t in ts]
        win = [t.window_s for t in ts]
        exp = [t.exposure_s for t in ts if t.exposure_s is not None]
        met = len([w for w in win if w <= rpo_target_s])
        lines.append(
            f"{interval:<10g}  {len(ts):>2}  {_pair(lost, 0):>12}  {_pair(win, 1):>16}  "
            f"{f'{met}/{len(ts)}':>8}  {_one(percentile(exp, 50)):>14}"
        )
    return "\n".join(lines)


def _pair(values: list[float], digits: int) -> str:
    p50, p95 = percentile(values, 50), percentile(values, 95)
    return f"{p50:.{digits}f}/{p95:.{digits}f}" if p50 is not None and p95 is not None else "-"


def _one(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


async def run(args: argparse.Namespace, base: Path) -> list[Trial]:
    rng = random.Random(args.seed)
    trials: list[Trial] = []
    link = SourceLink(load_config(base).aws.endpoint_url or "")
    await link.open()  # picks the port the configs name; each trial reopens it on the same port
    link.cut()
    for interval in args.intervals:
        cfg = bench_config(base, interval, link.port)
        async with rto_fleet.running_worker(cfg) as client:
            for n in range(1, args.trials + 1):
                await asyncio.to_thread(rto_fleet.reset_fleet, cfg)
                t = await trial(cfg, client, link, interval, n, args.rate, rng)
                print(
                    f"interval {interval:g}s trial {n}: {t.lost}/{t.written} objects lost, window {t.window_s:.2f} s, "
                    f"failover {t.failover}, exposure recorded {_one(t.exposure_s)} s ({t.exposure_detail})",
                    flush=True,
                )
                trials.append(t)
            await asyncio.to_thread(rto_fleet.reset_fleet, cfg)
    return trials


def _with_state_bucket(path: Path) -> Path:
    """The private stack's config names the state bucket, so the stack's moto creates it at start."""
    data = yaml.safe_load(path.read_text())
    data["data"] = {"buckets": [{**STATE, "interval_s": 2}]}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    own = args.config is None
    base = args.config or _with_state_bucket(rto_fleet.write_bench_config(interval_s=10, threshold=3))
    cfg = load_config(base)
    try:
        if own:
            stack.up(cfg, base)
        trials = asyncio.run(run(args, base))
    finally:
        if own:
            stack.down(cfg)
            shutil.rmtree(base.parent, ignore_errors=True)
    rpo = cfg.objectives.rpo_target_s
    print(
        f"\nRPO benchmark: {len(trials)} primary-region kills, {args.rate:g} objects/s into {SOURCE_BUCKET}, "
        f"RPO target {rpo:g} s"
    )
    print(format_table(trials, rpo))
    if args.json:
        args.json.write_text(json.dumps([t.model_dump(mode="json") for t in trials], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
