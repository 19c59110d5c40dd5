"""Record the workflow histories that tests/replay/test_replay.py replays: `python -m tests.replay.record`.

When to re-record: only after an intentional change to a workflow's commands (its activities,
timers, child workflows, search-attribute upserts or their order) that is guarded by
`workflow.patched()` so that runs already in flight still replay. Keep the old files next to the new
ones (give the new ones a new name with --suffix) until no execution recorded under the old code can
still be running; then delete them. If test_replay.py fails and you did not mean to change command
order, do not re-record: fix the workflow, because the same failure would hit every in-flight
execution as a non-determinism error after a deploy.

The script brings up its own dev stack on free loopback ports (or ports from --port-range), runs
drctl's real worker in-process on fresh task queues, drives three FleetMonitor rounds (ending in
continue-as-new, a closed and fully replayable run), a manual Failover to us-east-1, a Failback, a
one-region canary Upgrade, a Backup and a Restore, a passing region-outage ChaosDrill and a
Migration (tests/replay/record_ops.py), a Failover through its approval gate (notice, reminder,
approval by another identity), writes each history as compact JSON, and tears the stack down.
`--only` records a subset (e.g. `--only drill` after a patched change to ChaosDrill).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import socket
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle

from drctl.client.connection import connect
from drctl.client.operations import start_operation
from drctl.config.schema import FleetConfig, NotificationsConfig, WebhookConfig, load_config
from drctl.devstack import stack
from drctl.models.failover import FailbackInput
from drctl.models.fleet_spec import FleetSpec
from drctl.models.monitor import MonitorInput
from drctl.models.phases import ApproveInput
from drctl.models.upgrade import upgrade_request
from drctl.worker.process import run_worker
from tests.replay.record_ops import record_backup_restore, record_drill, record_migration
from tests.support.config import fleet_config_data, short_tmp_dir
from tests.support.workers import fast_config, start_failover
from workflows.failback import Failback
from workflows.monitor import FleetMonitor
from workflows.upgrade import Upgrade

HISTORIES = Path(__file__).parent / "histories"
PORT_RE = re.compile(r"127\.0\.0\.1:(\d+)")


def _ports_in(lo: int, hi: int) -> Iterator[int]:
    """Free ports from lo..hi inclusive (manual runs must stay inside the engineer's range)."""
    for p in range(lo, hi + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                continue
        yield p


def _remap_ports(data: Any, new: dict[int, int], fresh: Iterator[int]) -> Any:
    """Every 127.0.0.1:<port>, `stats_port` and `prometheus_port` in the config data, moved to ports from `fresh`."""

    def sub(m: re.Match[str]) -> str:
        old = int(m.group(1))
        new.setdefault(old, next(fresh))
        return f"127.0.0.1:{new[old]}"

    if isinstance(data, dict):
        return {
            k: (
                new.setdefault(v, next(fresh))
                if k in ("stats_port", "prometheus_port")
                else _remap_ports(v, new, fresh)
            )
            for k, v in data.items()
        }
    if isinstance(data, list):
        return [_remap_ports(v, new, fresh) for v in data]
    return PORT_RE.sub(sub, data) if isinstance(data, str) else data


def write_config(directory: Path, port_range: tuple[int, int] | None) -> Path:
    data = fleet_config_data()
    data["name"] = "replay"
    if port_range:
        data = _remap_ports(data, {}, _ports_in(*port_range))
    path = directory / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


async def save(handle: WorkflowHandle[Any, Any], name: str) -> Path:
    history = await handle.fetch_history()
    # Compact JSON: to_json() indents, which triples the fixture size for no reader's benefit.
    path = HISTORIES / f"{name}.json"
    path.write_text(json.dumps(json.loads(history.to_json()), separators=(",", ":")) + "\n")
    print(f"wrote {path} ({path.stat().st_size} bytes, {len(history.events)} events)")
    return path


async def record_monitor(client: Client, cfg: FleetConfig, suffix: str) -> None:
    wid = f"monitor/{cfg.name}"
    # The round loop (not the watcher, whose one call would outlast the recording) with the config's
    # rebalance ticks beside it: three rounds, then continue-as-new after the ticks stopped.
    spec = FleetSpec.from_config(cfg).model_copy(update={"watcher": False})
    handle = await client.start_workflow(
        FleetMonitor.run,
        MonitorInput(spec=spec, max_iterations=3),
        id=wid,
        task_queue=cfg.temporal.task_queue,
    )
    first = client.get_workflow_handle(wid, run_id=handle.result_run_id)
    for _ in range(120):  # bounded: 3 rounds at interval_s=2 take ~6 s; 60 s at most
        if (await first.describe()).status == WorkflowExecutionStatus.CONTINUED_AS_NEW:
            break
        await asyncio.sleep(0.5)
    else:
        raise RuntimeError("monitor did not continue as new within 60 s")
    # The next run would watch forever; only the first, closed run is the fixture.
    await client.get_workflow_handle(wid).terminate("replay recording done")
    await save(first, f"monitor{suffix}")


async def record_core(client: Client, cfg: FleetConfig, suffix: str) -> None:
    """Failover to us-east-1, Failback, and a one-region canary Upgrade."""
    spec = FleetSpec.from_config(cfg)
    fo = await start_failover(client, cfg, spec=spec)
    res = await asyncio.wait_for(fo.result(), 120)
    assert res.status == "succeeded", res.error
    await save(fo, f"failover{suffix}")
    fb = await start_operation(
        client,
        cfg,
        Failback.run,
        FailbackInput(spec=spec),
        operation="failback",
        workflow_id=f"failback/{cfg.name}",
    )
    res = await asyncio.wait_for(fb.result(), 120)
    assert res.status == "succeeded", res.error
    await save(fb, f"failback{suffix}")
    req = upgrade_request(
        cfg, uuid.uuid4().hex[:8], "vllm/vllm-openai:v0.7.0", regions=["us-west-1"], steps_percent=[50, 100]
    )
    # Short windows, as in tests/upgrade: a few samples per window still judge a healthy canary.
    req = req.model_copy(
        update={
            "step_pause_s": 1.0,
            "scale_down_delay_s": 1.0,
            "limits": req.limits.model_copy(update={"min_samples": 8}),
        }
    )
    up = await start_operation(
        client, cfg, Upgrade.run, req, operation="upgrade", workflow_id=f"upgrade/{cfg.name}/{req.upgrade_id}"
    )
    res = await asyncio.wait_for(up.result(), 180)
    assert res.outcome == "SUCCEEDED", res
    await save(up, f"upgrade_canary{suffix}")


async def record_approval(client: Client, cfg: FleetConfig, suffix: str) -> None:
    """A Failover that waits at its gate: the approval notice, the reminder, then an approval."""
    gate = {"require_approval": True, "approval_timeout_s": 60.0, "approval_reminder_s": 58.0}
    spec = FleetSpec.from_config(cfg.model_copy(update={"failover": cfg.failover.model_copy(update=gate)}))
    fo = await start_failover(client, cfg, spec=spec)
    for _ in range(60):  # bounded: the reminder is due 2 s after the gate opens; 30 s at most
        notices = [e async for e in fo.fetch_history_events() if e.HasField(_CHILD_STARTED)]
        if len(notices) >= 2:
            break
        await asyncio.sleep(0.5)
    else:
        raise RuntimeError("the approval notice and its reminder did not start within 30 s")
    # The recording client started it, so four eyes want another approver.
    await fo.execute_update("approve", ApproveInput(approver="replay-approver"), result_type=str)
    res = await asyncio.wait_for(fo.result(), 120)
    assert res.status == "succeeded" and res.approved_by == "replay-approver", res
    await save(fo, f"failover_approval{suffix}")


_CHILD_STARTED = "start_child_workflow_execution_initiated_event_attributes"
# The approval group's webhook: only approval.pending, so no other recording schedules a notice.
# Nothing listens on port 9: each notice ends Failed after retry_for_s, beside the operation.
APPROVAL_HOOK = WebhookConfig(
    name="replay-approvers", url="http://127.0.0.1:9/hook", events=["approval.pending"], retry_for_s=5
)

# In this order: the migration leaves every weight on us-east-1, so it comes last.
GROUPS = ("monitor", "core", "backup", "drill", "approval", "migration")


async def record(cfg: FleetConfig, suffix: str, only: list[str]) -> None:
    client = await connect(cfg)
    stop = asyncio.Event()
    worker = asyncio.create_task(run_worker(cfg, None, client=client, stop=stop))
    try:
        if "monitor" in only:
            await record_monitor(client, cfg, suffix)
        if "core" in only:
            await record_core(client, cfg, suffix)
        if "backup" in only:
            await record_backup_restore(client, cfg, save, suffix)
        if "drill" in only:
            await record_drill(client, cfg, save, suffix)
        if "approval" in only:
            await record_approval(client, cfg, suffix)
        if "migration" in only:
            await record_migration(client, cfg, save, suffix)
    finally:
        stop.set()
        await asyncio.wait_for(worker, 30)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port-range", help="LO-HI: take the stack's ports from this range (default: any free)")
    ap.add_argument(
        "--suffix", default="", help="Appended to each file name, e.g. _v2 after a patched change."
    )
    ap.add_argument(
        "--only",
        default=",".join(GROUPS),
        help=f"Comma-separated subset of {','.join(GROUPS)} (default: all).",
    )
    args = ap.parse_args(argv)
    only = [g for g in args.only.split(",") if g]
    if unknown := set(only) - set(GROUPS):
        ap.error(f"unknown --only group(s) {sorted(unknown)}; known: {', '.join(GROUPS)}")
    rng = tuple(int(p) for p in args.port_range.split("-")) if args.port_range else None
    directory = short_tmp_dir("drctl-replay-")
    path = write_config(directory, rng)  # type: ignore[arg-type]
    cfg = load_config(path)
    HISTORIES.mkdir(exist_ok=True)
    try:
        stack.up(cfg, path)
        hooks = NotificationsConfig(webhooks=[APPROVAL_HOOK])
        asyncio.run(record(fast_config(cfg).model_copy(update={"notifications": hooks}), args.suffix, only))
    finally:
        stack.down(cfg)
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
