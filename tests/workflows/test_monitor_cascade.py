"""A second fault during the monitor's own failback (issue 26, the cascading failure), on the dev stack.

us-west-1 dies and the monitor fails over to us-east-1. us-west-1 comes back and the failback starts
stepping share onto it; then us-east-1 dies. The failback must not go on stepping share onto the
dead us-east-1, and the monitor must not hold there: the failover of us-east-1 preempts the
failback, every point ends on us-west-1 and stays there while us-east-1 is down, and users'
requests through the global endpoint are answered. Cleared, us-east-1 gets its 40 back.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import pytest
from temporalio.client import Client, WorkflowHandle

from drctl.config.schema import FleetConfig
from drctl.models.monitor_decisions import DecisionsView
from tests.support.wait import until
from tests.support.workers import StartWorkers, admin, monitor_handle, monitor_status, weights

pytestmark = [pytest.mark.slow, pytest.mark.devstack]

KILL = {"action": "kill", "track": "stable", "stay_down": True}


def _answered(cfg: FleetConfig, n: int) -> tuple[int, dict[str, int]]:
    """n completions through the global endpoint: how many were answered 200, by region."""
    body = {"model": cfg.workload.model, "prompt": "hi", "max_tokens": 1}
    by: dict[str, int] = {}
    ok = 0
    with httpx.Client(timeout=5, trust_env=False) as c:
        for _ in range(n):
            try:
                r = c.post(f"{cfg.traffic.global_endpoint}/v1/completions", json=body)
            except httpx.HTTPError:
                continue
            if r.status_code == 200:
                ok += 1
                region = r.headers.get(cfg.traffic.region_header, "?")
                by[region] = by.get(region, 0) + 1
    return ok, by


async def test_a_second_fault_during_the_failback_is_failed_over_at_once_and_held(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers(watcher=True, failback_window_s=4.0)
    mon = await monitor_handle(temporal_client, cfg)
    admin(cfg, "us-west-1", "/faults/replicas", KILL)
    await until(
        lambda: weights(cfg) == {"us-west-1": 0, "us-east-1": 100},
        timeout_s=60,
        interval_s=0.3,
        what="failover",
    )
    admin(cfg, "us-west-1", "/faults/clear")
    # The failback's first step puts share back on us-west-1: then us-east-1 dies.
    await until(
        lambda: weights(cfg)["us-west-1"] > 0, timeout_s=90, interval_s=0.2, what="the failback steps"
    )
    stepped = weights(cfg)
    admin(cfg, "us-east-1", "/faults/replicas", KILL)
    killed = time.monotonic()
    await until(
        lambda: weights(cfg) == {"us-west-1": 100, "us-east-1": 0},
        timeout_s=60,
        interval_s=0.2,
        what="us-east-1 failed over during the failback",
    )
    drained_s = time.monotonic() - killed
    print(f"failback had stepped to {stepped}; us-east-1 drained {drained_s:.1f} s after its fault")
    # Held there while us-east-1 is down: no step of a failback puts share back on it.
    end = time.monotonic() + 12
    while time.monotonic() < end:
        assert weights(cfg)["us-east-1"] == 0, weights(cfg)
        await asyncio.sleep(0.5)
    ok, by = await asyncio.to_thread(_answered, cfg, 20)
    assert ok == 20 and set(by) == {"us-west-1"}, (ok, by)
    st = await monitor_status(mon)
    assert [r.source for r in st.failed_over] == ["us-east-1"], st.failed_over
    admin(cfg, "us-east-1", "/faults/clear")
    await until(lambda: weights(cfg) == cfg.weights, timeout_s=120, interval_s=0.5, what="failback to 60/40")


async def test_a_flapping_replica_is_lost_capacity_not_a_down_region(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    """One of us-west-1's two replicas crash-loops for 30 s: killed as soon as both serve again, it
    restarts each time, so one replica always serves. The region is never failed over, and no share
    moves while the fleet is within its capacity."""
    cfg = await start_workers(watcher=True)
    mon = await monitor_handle(temporal_client, cfg)
    kills = 0
    end = time.monotonic() + 30
    while time.monotonic() < end:
        states = [r["state"] for r in admin(cfg, "us-west-1", "/replicas") if r["track"] == "stable"]
        if states.count("running") >= 2:
            admin(cfg, "us-west-1", "/faults/replicas", {"action": "kill", "track": "stable", "count": 1})
            kills += 1
        await asyncio.sleep(0.5)
        assert weights(cfg) == cfg.weights, (weights(cfg), await _why(mon))
    await asyncio.sleep(6)  # a failover in the making would have started by now
    st = await monitor_status(mon)
    assert kills >= 3 and not st.failed_over and weights(cfg) == cfg.weights, (kills, await _why(mon))
    ok, by = await asyncio.to_thread(_answered, cfg, 20)
    assert ok == 20, (ok, by)


async def _why(mon: WorkflowHandle[Any, Any]) -> str:
    """The monitor's regions and decision log, for a failed assertion."""
    st = await monitor_status(mon)
    view = await mon.query("decisions", result_type=DecisionsView)
    regions = "; ".join(f"{r}: {t.state.value} ({t.last_reason})" for r, t in st.regions.items())
    return regions + "\n" + "\n".join(d.line() for d in view.entries)
