"""The monitor with `health.watcher` on the dev stack: a worker restart costs about one heartbeat.

The watcher activity runs the probe and passive loop and heartbeats its trackers every second.
The worker running it stops (a restart); while no worker runs, us-west-1 loses every replica;
another worker starts. The watcher's next attempt resumes from the last heartbeat (its round count
goes on from there) and the fault is still detected, within the fast-confirm rounds plus the gap.
With traffic flowing, an errors fault is seen first in the region's own counters (passive SUSPECT)
and confirmed by the probe.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from drctl.config.schema import FleetConfig
from drctl.models.health import RegionState
from drctl.models.monitor import MonitorStatus
from drctl.models.watch import WatchProgress, WatchResult
from drctl.worker.process import run_worker
from tests.support.wait import assert_eventually, until
from tests.support.workers import (
    StartWorkers,
    admin,
    fast_config,
    healthy_rounds,
    monitor_handle,
    monitor_status,
    terminate_fleet_workflows,
    weights,
)

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


async def _heartbeat(client: Client, mon: WorkflowHandle[Any, Any]) -> tuple[int, WatchProgress] | None:
    """The running watcher's attempt and last heartbeat, as the server holds them."""
    desc = await mon.describe()
    for act in desc.raw_description.pending_activities:
        if act.activity_type.name == "watch_regions" and act.heartbeat_details.payloads:
            [details] = await client.data_converter.decode(act.heartbeat_details.payloads, [WatchProgress])
            return act.attempt, details
    return None


async def _watch_results(client: Client, mon: WorkflowHandle[Any, Any]) -> list[WatchResult]:
    out = []
    async for e in mon.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            [res] = await client.data_converter.decode(
                e.activity_task_completed_event_attributes.result.payloads
            )
            if isinstance(res, dict) and "passive_reads" in res:
                out.append(WatchResult.model_validate(res))
    return out


async def test_worker_restart_resumes_the_watcher_from_its_heartbeat_and_a_fault_meanwhile_is_detected(
    temporal_client: Client, fleet_config: FleetConfig, reset_fleet: None
) -> None:
    base = fast_config(fleet_config, watcher=True)
    # Manual: detection is what is measured here; failing over is the monitor's, tested elsewhere.
    cfg = base.model_copy(update={"failover": base.failover.model_copy(update={"policy": "manual"})})
    stop1, stop2 = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(run_worker(cfg, [], client=temporal_client, stop=stop1, http_port=0))
    second: asyncio.Task[None] | None = None
    try:
        mon = await monitor_handle(temporal_client, cfg)

        async def rounds(n: int) -> tuple[int, WatchProgress] | None:
            hb = await _heartbeat(temporal_client, mon)
            return hb if hb is not None and hb[1].rounds >= n else None

        attempt, before = await assert_eventually(
            lambda: rounds(2), timeout_s=30, interval_s=0.3, what="the watcher heartbeats two probe rounds"
        )
        assert attempt == 1 and all(t.state is RegionState.HEALTHY for t in before.trackers.values())
        assert (await monitor_status(mon)).regions["us-west-1"].state is RegionState.HEALTHY

        stop1.set()
        await asyncio.wait_for(first, 30)
        stopped = time.monotonic()
        admin(cfg, "us-west-1", "/faults/replicas", {"action": "kill", "track": "stable", "stay_down": True})
        second = asyncio.create_task(run_worker(cfg, [], client=temporal_client, stop=stop2, http_port=0))

        async def west_unhealthy() -> bool:
            return (await monitor_status(mon)).regions["us-west-1"].state is RegionState.UNHEALTHY

        await assert_eventually(west_unhealthy, timeout_s=60, interval_s=0.2, what="us-west-1 UNHEALTHY")
        detected_s = time.monotonic() - stopped
        results = await _watch_results(temporal_client, mon)
        resumed = [r for r in results if r.resumed]
        assert resumed, results
        # The resumed attempt went on from the heartbeat: its count includes the first worker's rounds.
        assert resumed[0].rounds > before.rounds, (resumed[0].rounds, before.rounds)
        assert resumed[0].trackers["us-west-1"].state is not RegionState.HEALTHY
        # Lost: the restart gap and at most one heartbeat; then three failed checks at fast confirm.
        assert detected_s < 30, detected_s
        print(f"fault to UNHEALTHY across a worker restart: {detected_s:.1f}s")
    finally:
        stop1.set()
        stop2.set()
        await terminate_fleet_workflows(temporal_client, cfg)
        for task in (first, second):
            if task is not None:
                await asyncio.wait_for(task, 30)


async def test_watcher_monitor_fails_over_a_dead_region_and_back_after_the_window(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    """With the watcher the monitor still decides: a transition starts the failover, and the failback
    runs once the region has been HEALTHY for the stabilization window (a workflow timer, no probe)."""
    cfg = await start_workers(watcher=True)
    mon = await monitor_handle(temporal_client, cfg)

    async def rounds(n: int) -> tuple[int, WatchProgress] | None:
        hb = await _heartbeat(temporal_client, mon)
        return hb if hb is not None and hb[1].rounds >= n else None

    await assert_eventually(lambda: rounds(2), timeout_s=30, interval_s=0.3, what="the watcher probed twice")
    admin(cfg, "us-west-1", "/faults/replicas", {"action": "kill", "track": "stable", "stay_down": True})

    async def failed_over() -> bool:
        return bool((await monitor_status(mon)).failed_over)

    await assert_eventually(failed_over, timeout_s=60, interval_s=0.5, what="automatic failover")
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
    admin(cfg, "us-west-1", "/faults/clear")
    await until(lambda: weights(cfg) == cfg.weights, timeout_s=90, interval_s=0.5, what="failback to 60/40")

    async def failed_back() -> MonitorStatus | None:
        st = await monitor_status(mon)
        return st if st.last_failback and not st.failed_over else None

    st = await assert_eventually(failed_back, timeout_s=60, interval_s=0.5, what="the failback recorded")
    assert st.regions["us-west-1"].state is RegionState.HEALTHY and st.last_failback.startswith(
        "succeeded"
    ), st
    # Only transitions and decisions wrote history: far fewer watcher calls than probe rounds.
    results = await _watch_results(temporal_client, mon)
    assert results and sum(r.rounds for r in results) > len(results), results


def _load(cfg: FleetConfig, stop: threading.Event, deadline_s: float) -> None:
    """Completions through the global endpoint (both regions get their share), bounded in time."""
    body = {"model": cfg.workload.model, "prompt": "hi", "max_tokens": 2}
    end = time.monotonic() + deadline_s
    with httpx.Client(timeout=5, trust_env=False) as c:
        while not stop.is_set() and time.monotonic() < end:
            with contextlib.suppress(httpx.HTTPError):
                c.post(f"{cfg.traffic.global_endpoint}/v1/completions", json=body)


async def test_watcher_makes_an_erroring_region_suspect_from_passive_signals_and_the_probe_confirms(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig
) -> None:
    """Traffic flows; us-east-1 starts failing every completion. Its gateway's and replicas' own counters
    make it SUSPECT between two probe rounds (30 s apart here), and the confirming probes make it UNHEALTHY."""
    base = fast_config(fleet_config, watcher=True, interval_s=30.0)
    passive = base.health.passive.model_copy(update={"enabled": True})
    cfg = await start_workers(
        cfg=base.model_copy(
            update={
                "health": base.health.model_copy(update={"passive": passive}),
                "failover": base.failover.model_copy(update={"policy": "manual"}),  # detection only
            }
        )
    )
    stop = threading.Event()
    loader = threading.Thread(target=_load, args=(cfg, stop, 60), daemon=True)
    loader.start()
    try:
        mon = await monitor_handle(temporal_client, cfg)
        await assert_eventually(
            lambda: healthy_rounds(mon, 1),
            timeout_s=30,
            interval_s=0.3,
            what="the watcher probed every region healthy",
        )
        start = await monitor_status(mon)

        async def windows_full() -> bool:  # the passive window holds traffic: reads give a signal
            hb = await _heartbeat(temporal_client, mon)
            return hb is not None and hb[1].passive_reads >= 2 + cfg.health.passive.window_s

        await assert_eventually(
            windows_full, timeout_s=20, interval_s=0.5, what="passive reads over a full window"
        )
        admin(cfg, "us-east-1", "/faults/inference", {"error_rate": 1.0})
        faulted = time.monotonic()

        async def east_unhealthy() -> bool:
            return (await monitor_status(mon)).regions["us-east-1"].state is RegionState.UNHEALTHY

        await assert_eventually(east_unhealthy, timeout_s=30, interval_s=0.3, what="us-east-1 UNHEALTHY")
        print(f"errors fault to UNHEALTHY through passive + probe: {time.monotonic() - faulted:.1f}s")
    finally:
        stop.set()
        await asyncio.to_thread(loader.join, 10)
    # The watcher's returns, from the history: first the passive suspicion, then the probe's verdict.
    east = [
        (r.trackers["us-east-1"].state, r.trackers["us-east-1"].last_reason)
        for r in await _watch_results(temporal_client, mon)
        if "us-east-1" in r.changed
    ]
    assert east[0][0] is RegionState.SUSPECT and east[0][1].startswith("passive:"), east
    assert "error rate" in east[0][1], east
    assert east[-1][0] is RegionState.UNHEALTHY and not east[-1][1].startswith("passive:"), east
    st = await monitor_status(mon)
    assert (
        st.probe_rounds > start.probe_rounds
        and st.regions["us-west-1"].state is RegionState.HEALTHY
        and st.last_failover is None
    )
    assert weights(cfg) == cfg.weights
