"""`drctl failover` as a user runs it (a worker SIGKILLed mid-failover: tests/crash/)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from drctl.client.identity import identity
from drctl.config.schema import FleetConfig
from drctl.models import search_attributes as sa
from drctl.models.failover import FailoverResult
from tests.support.cli import DRCTL, cli, drctl
from tests.support.config import tuned, write_config
from tests.support.temporal import closed_status
from tests.support.wait import assert_eventually
from tests.support.workers import StartWorkers, refused_cli_failover, replicas, weights

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


async def test_cli_failover_moves_haproxy_weights_and_exits_0(
    start_workers: StartWorkers, fleet_config_path: Path
) -> None:
    cfg = await start_workers()
    path = write_config(cfg, fleet_config_path.parent)
    proc = await asyncio.to_thread(drctl, "failover", "--to", "us-east-1", "--yes", "-c", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
    assert (
        f"{cfg.temporal.ui_url}/namespaces/{cfg.temporal.namespace}/workflows/failover%2F{cfg.name}"
        in proc.stderr
    )
    assert "succeeded" in proc.stdout and "measured RTO" in proc.stdout
    # HAProxy applies and propagates in one step, and the result says so.
    assert "global change" in proc.stdout and "(synchronous)" in proc.stdout
    # <TAB> after `drctl ops show` offers the operation just run, asked of Temporal.
    words = f"drctl ops show -c {path} fail"
    env = {"_DRCTL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": "5"}
    done = await asyncio.to_thread(drctl, env=env)
    assert done.returncode == 0 and f"failover/{cfg.name}" in done.stdout.split(), done


async def test_cli_failover_to_an_unhealthy_region_is_refused_and_exits_1(
    start_workers: StartWorkers, fleet_config_path: Path
) -> None:
    cfg, _, proc = await refused_cli_failover(start_workers, fleet_config_path.parent)
    assert "us-east-1" in proc.stdout and "succeeded" not in proc.stdout
    assert weights(cfg) == cfg.weights  # refused in preflight: nothing moved


async def test_cli_dry_run_changes_nothing_and_bad_input_exits_2(
    start_workers: StartWorkers, fleet_config_path: Path, fleet_config: FleetConfig
) -> None:
    cfg = await start_workers()
    path = write_config(cfg, fleet_config_path.parent)
    before = (weights(cfg), replicas(cfg, "us-east-1"))
    proc = await asyncio.to_thread(
        drctl, "failover", "--to", "us-east-1", "--dry-run", "-o", "json", "-c", str(path)
    )
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)["plan"]
    # The workflow's own plan function: 2 serving in us-east-1 + us-west-1's 2 move with its share.
    assert (
        plan["weights_after"] == {"us-west-1": 0, "us-east-1": 100} and plan["target_replicas_planned"] == 4
    )
    assert plan["problems"] == [] and "2 from us-west-1" in plan["sizing"]
    assert (weights(cfg), replicas(cfg, "us-east-1")) == before

    unknown = await asyncio.to_thread(drctl, "failover", "--to", "eu-west-9", "--yes", "-c", str(path))
    assert unknown.returncode == 2 and "us-west-1" in unknown.stderr and "us-east-1" in unknown.stderr
    unconfirmed = await asyncio.to_thread(drctl, "failover", "--to", "us-east-1", "-c", str(path))
    assert unconfirmed.returncode == 2 and "--yes" in unconfirmed.stderr
    assert weights(cfg) == before[0]


async def test_cli_second_failover_refused_naming_the_first(
    start_workers: StartWorkers, fleet_config_path: Path, temporal_client: Client
) -> None:
    cfg = await start_workers()
    gated = tuned(cfg, "failover", require_approval=True)
    path = write_config(gated, fleet_config_path.parent)
    # The first failover waits at its approval gate; Ctrl-C stops the watching, not the failover.
    # Alice starts it (DRCTL_IDENTITY), so four eyes leave the approval to someone else.
    alice, bob = {"DRCTL_IDENTITY": "alice@example.com"}, {"DRCTL_IDENTITY": "bob@example.com"}
    log = path.with_suffix(".stderr")
    with log.open("w") as stderr:
        first = await asyncio.create_subprocess_exec(
            str(DRCTL),
            "failover",
            "--to",
            "us-east-1",
            "--yes",
            "-c",
            str(path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, **alice},
        )

    async def first_started() -> bool:
        return "failover started" in log.read_text()

    try:
        await assert_eventually(
            first_started, timeout_s=60, interval_s=0.2, what="the first failover to start"
        )
        first.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(first.wait(), 30) == 130, log.read_text()
    finally:
        if first.returncode is None:
            first.kill()
            await first.wait()
    assert f"keeps running; follow it again with `drctl ops watch failover/{cfg.name}`" in log.read_text()
    second = await asyncio.to_thread(drctl, "failover", "--to", "us-west-1", "--yes", "-c", str(path))
    assert second.returncode == 3, second.stdout + second.stderr
    assert f"failover/{cfg.name}" in second.stderr and cfg.temporal.ui_url in second.stderr
    # A busy fleet is exit 3 from every command that would start an operation the failover blocks
    # (told apart by visibility before they start anything, so wait until it lists the failover).

    async def listed() -> bool:
        code, out, _ = await cli("ops", "list", "-o", "json", "-c", str(path))
        return code == 0 and f"failover/{cfg.name}" in [o["workflow_id"] for o in json.loads(out)]

    await assert_eventually(listed, timeout_s=30, interval_s=0.3, what="the failover in visibility")
    for argv in (
        ["failback", "--yes"],
        ["upgrade", "--image", "vllm/vllm-openai:v9.9.9", "--no-wait", "--yes"],
        ["migrate", "--from", "us-west-1", "--to", "us-east-1"],
        ["restore", "--backup", "any"],
    ):
        code, out, err = await cli(*argv, "-c", str(path))
        assert code == 3 and f"failover/{cfg.name} is running" in err, (argv, out, err)
    code, out, err = await cli("ops", "list", "-o", "json", "-c", str(path))
    [listed_first] = [o for o in json.loads(out) if o["workflow_id"] == f"failover/{cfg.name}"]
    assert listed_first["initiator"] == "alice@example.com", listed_first
    table = await asyncio.to_thread(drctl, "ops", "list", "-c", str(path))
    assert table.returncode == 0 and "alice@example.com" in table.stdout, table.stdout + table.stderr
    # Four eyes: Alice may not approve her own failover (however she spells herself) ...
    for argv, env in (([], alice), (["--approver", "ALICE@example.com"], None)):
        own = await asyncio.to_thread(
            drctl, "ops", "approve", f"failover/{cfg.name}", *argv, "-c", str(path), env=env
        )
        assert own.returncode == 2 and "four eyes: " in own.stderr, own.stdout + own.stderr
        assert "Traceback" not in own.stderr and len(own.stderr.strip().splitlines()) == 1, own.stderr
    # ... and Bob may.
    approve = await asyncio.to_thread(
        drctl,
        "ops",
        "approve",
        f"failover/{cfg.name}",
        "--comment",
        "checked",
        "-o",
        "json",
        "-c",
        str(path),
        env=bob,
    )
    assert approve.returncode == 0, approve.stderr
    answer = json.loads(approve.stdout)
    assert answer["update"] == "approve" and answer["by"] == "bob@example.com", answer
    assert "approved by bob@example.com" in answer["answer"], answer
    # `ops watch` re-attaches and ends as `failover` would have.
    code, out, err = await asyncio.wait_for(
        cli("ops", "watch", f"failover/{cfg.name}", "-o", "json", "-c", str(path)), 90
    )
    assert code == 0, (out, err)
    watched = json.loads(out)
    assert watched["workflow_id"] == f"failover/{cfg.name}" and watched["result"]["status"] == "succeeded"
    handle = temporal_client.get_workflow_handle(f"failover/{cfg.name}", result_type=FailoverResult)
    res = await handle.result()
    assert res.status == "succeeded" and res.approved_by == "bob@example.com"
    assert watched["result"]["approved_by"] == res.approved_by
    # Who did what, where Temporal shows it: the client identity on the start and the update events.
    events = (await handle.fetch_history()).events
    assert events[0].workflow_execution_started_event_attributes.identity == "alice@example.com"
    accepted = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request
        for e in events
        if e.HasField("workflow_execution_update_accepted_event_attributes")
    ]
    # One accepted update: the refused self-approvals never reached history.
    assert [(r.meta.identity, r.input.name) for r in accepted] == [("bob@example.com", "approve")]
    desc = await handle.describe()
    assert await desc.static_summary() == f"failover of fleet {cfg.name} (us-east-1) by alice@example.com"
    assert await desc.memo_value("initiator") == "alice@example.com"
    shown = await asyncio.to_thread(drctl, "ops", "show", f"failover/{cfg.name}", "-c", str(path))
    assert "started by alice@example.com, approved by bob@example.com" in shown.stdout, shown.stdout
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
    # Watching an operation that already ended shows its result at once, with its exit code.
    code, out, err = await cli("ops", "watch", f"failover/{cfg.name}", "-c", str(path))
    assert code == 0 and "failover us-west-1 → us-east-1: succeeded" in out, (out, err)
    code, out, err = await cli("ops", "watch", f"failover/{cfg.name}-nosuch", "-c", str(path))
    assert code == 2 and f"no operation 'failover/{cfg.name}-nosuch'" in err, (out, err)


async def test_cli_monitor_status_and_ops(
    start_workers: StartWorkers, fleet_config_path: Path, temporal_client: Client
) -> None:
    # The probe budget is the product's default (2 s), not the 1 s the failure tests use: this test
    # asserts HEALTHY, which a CLI start-up burst on two cores must not turn into a timeout.
    cfg = await start_workers(probe_timeout_s=2.0, interval_s=3.0)
    path = write_config(cfg, fleet_config_path.parent)
    start = await asyncio.to_thread(drctl, "monitor", "start", "-c", str(path))
    assert start.returncode == 0 and "monitor started" in start.stdout, start.stderr
    again = await asyncio.to_thread(drctl, "monitor", "start", "-c", str(path))
    assert "already running" in again.stdout
    doc = json.loads(
        (await asyncio.to_thread(drctl, "monitor", "start", "-o", "json", "-c", str(path))).stdout
    )
    assert doc["workflow_id"] == f"monitor/{cfg.name}" and doc["started"] is False and doc["changes"] == [], (
        doc
    )

    async def monitor_rounds() -> dict | None:
        p = await asyncio.to_thread(drctl, "monitor", "status", "-o", "json", "-c", str(path))
        st = json.loads(p.stdout) if p.returncode == 0 else None
        return st if st and st["probe_rounds"] >= 1 else None

    st = await assert_eventually(monitor_rounds, timeout_s=30, interval_s=0.5, what="monitor status")
    assert st["regions"]["us-west-1"]["state"] == "HEALTHY" and st["alert"] is None

    status = await asyncio.to_thread(drctl, "status", "-o", "json", "-c", str(path))
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    west = data["regions"]["us-west-1"]
    assert (
        west["weight"] == 60 and west["replicas"]["replicas"] == 2 and west["probe"]["status"] == "HEALTHY"
    ), west
    assert data["monitor"]["running"] and data["operations"] == []
    table = await asyncio.to_thread(drctl, "status", "-c", str(path))
    assert table.returncode == 0 and "us-east-1" in table.stdout and "no running operations" in table.stdout

    ops = await asyncio.to_thread(drctl, "ops", "list", "-o", "json", "-c", str(path))
    assert ops.returncode == 0 and json.loads(ops.stdout) == []
    stop = await asyncio.to_thread(drctl, "monitor", "stop", "--yes", "-c", str(path))
    assert stop.returncode == 0, stop.stderr
    # The exit code only says the cancel was sent: the workflow itself must end, cancelled.
    handle = temporal_client.get_workflow_handle(f"monitor/{cfg.name}")
    closed = await closed_status(handle, timeout_s=30, what="monitor closed")
    assert closed is WorkflowExecutionStatus.CANCELED
    # Who started the monitor (the CLI inherits this environment: user@host here), searchable in the UI.
    desc = await handle.describe()
    assert desc.typed_search_attributes.get(sa.INITIATOR) == identity(cfg)


async def test_cli_temporal_unreachable_names_the_address(
    fleet_config: FleetConfig, fleet_config_path: Path
) -> None:
    from tests.support.ports import free_port

    addr = f"127.0.0.1:{free_port()}"
    cfg = tuned(fleet_config, "temporal", address=addr)
    path = write_config(cfg, fleet_config_path.parent)
    proc = await asyncio.to_thread(drctl, "failover", "--to", "us-east-1", "--yes", "-c", str(path))
    assert proc.returncode == 3 and addr in proc.stderr and "Traceback" not in proc.stderr
