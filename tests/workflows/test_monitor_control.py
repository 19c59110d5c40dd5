"""The monitor under operator control on the dev stack: manual policy, pause/resume, `set_policy`, stop.

One monitor, one fault: a manual monitor sees us-west-1 UNHEALTHY and moves nothing; paused, it
probes nothing (its watcher is cancelled); resumed, it probes again; switched to automatic with
`set_policy`, it fails over.
`drctl monitor start|status|stop` run in-process (tests.support.cli).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from drctl.client.monitor_view import live_status
from drctl.config.schema import FleetConfig
from drctl.models.health import RegionState
from drctl.models.monitor import MonitorStatus, PolicyUpdate
from tests.support.cli import cli
from tests.support.config import write_config
from tests.support.wait import assert_eventually
from tests.support.workers import StartWorkers, admin, fast_config, weights

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


async def test_manual_monitor_moves_nothing_until_set_policy_automatic_and_pause_stops_probing(
    start_workers: StartWorkers, temporal_client: Client, fleet_config_path: Path, fleet_config: FleetConfig
) -> None:
    base = fast_config(fleet_config)
    cfg = await start_workers(
        cfg=base.model_copy(update={"failover": base.failover.model_copy(update={"policy": "manual"})})
    )
    path = str(write_config(cfg, fleet_config_path.parent))
    code, out, err = await cli("monitor", "start", "-c", path)
    assert code == 0 and "monitor started" in out, (out, err)
    mon = temporal_client.get_workflow_handle(f"monitor/{cfg.name}")

    async def status() -> MonitorStatus:
        return await live_status(mon)  # with the watcher: its heartbeat's trackers and rounds

    async def healthy() -> bool:
        st = await status()
        return st.probe_rounds >= 2 and all(r.state is RegionState.HEALTHY for r in st.regions.values())

    await assert_eventually(healthy, timeout_s=30, interval_s=0.3, what="both regions healthy")
    admin(cfg, "us-west-1", "/faults/replicas", {"action": "kill", "track": "stable", "stay_down": True})

    async def west_unhealthy() -> MonitorStatus | None:
        st = await status()
        return st if st.regions["us-west-1"].state is RegionState.UNHEALTHY else None

    seen = await assert_eventually(west_unhealthy, timeout_s=60, interval_s=0.3, what="us-west-1 UNHEALTHY")
    # Manual: rounds go on (two more at 2 s), the region stays UNHEALTHY, and nothing is failed over.
    await assert_eventually(
        lambda: _at_least(status, seen.probe_rounds + 2), timeout_s=30, what="two more rounds"
    )
    st = await status()
    assert st.policy == "manual" and st.last_failover is None and st.active_failover is None
    assert weights(cfg) == cfg.weights
    code, out, _ = await cli("monitor", "status", "-o", "json", "-c", path)
    assert code == 0 and json.loads(out)["policy"] == "manual"
    code, out, _ = await cli("monitor", "status", "-c", path)  # the watcher's rounds and heartbeat age
    assert code == 0 and "probe rounds" in out, out
    assert "live from the watcher's heartbeat" in out or "no heartbeat yet" in out, out

    await mon.signal("pause")
    await assert_eventually(lambda: _paused(status), timeout_s=10, what="paused")
    await asyncio.sleep(2.5)  # a round already under way finishes

    async def watcher_gone() -> bool:  # the cancel reaches the watcher with its next forwarded heartbeat
        desc = await mon.describe()
        return not [
            a for a in desc.raw_description.pending_activities if a.activity_type.name == "watch_regions"
        ]

    await assert_eventually(watcher_gone, timeout_s=15, interval_s=0.3, what="the watcher stopped")
    probed = {r: t.last_probed_at for r, t in (await status()).regions.items()}
    await asyncio.sleep(5)  # two and a half probe intervals: a paused monitor probes nothing
    assert {r: t.last_probed_at for r, t in (await status()).regions.items()} == probed
    await mon.signal("resume")

    async def probing_again() -> bool:
        st = await status()
        return not st.paused and all(
            t.last_probed_at and t.last_probed_at > probed[r] for r, t in st.regions.items()
        )

    await assert_eventually(probing_again, timeout_s=30, interval_s=0.3, what="probes again after resume")

    changed = await mon.execute_update("set_policy", PolicyUpdate(policy="automatic"), result_type=str)
    assert changed == "policy manual → automatic"
    await assert_eventually(
        lambda: asyncio.to_thread(lambda: weights(cfg) == {"us-west-1": 0, "us-east-1": 100}),
        timeout_s=60,
        interval_s=0.2,
        what="the automatic failover after set_policy",
    )
    st = await assert_eventually(lambda: _failed_over(status), timeout_s=60, what="the failover recorded")
    assert st.last_failover is not None and st.last_failover.source == "us-west-1"
    # Why traffic is where it is: the failover in the decision log, with its reason and outcome.
    code, out, err = await cli("monitor", "decisions", "-o", "json", "-c", path)
    assert code == 0, err
    failovers = [e for e in json.loads(out)["entries"] if e["action"] == "failover"]
    assert [e["outcome"] for e in failovers] == ["started", "applied"], out
    assert failovers[0]["reasons"][0].startswith("us-west-1 UNHEALTHY")
    assert failovers[1]["weights_after"] == {"us-west-1": 0, "us-east-1": 100}

    code, out, err = await cli("monitor", "stop", "--yes", "-c", path)
    assert code == 0, err

    async def closed() -> bool:
        return (await mon.describe()).status is WorkflowExecutionStatus.CANCELED

    await assert_eventually(closed, timeout_s=30, interval_s=0.3, what="monitor closed as cancelled")
    code, _, err = await cli("monitor", "status", "-c", path)
    assert code == 1 and "not running" in err
    code, _, err = await cli("monitor", "decisions", "-c", path)
    assert code == 1 and "not running" in err
    # A closed run still answers queries; `drctl status` must not take that for a running monitor.
    # us-west-1 is down, so status exits 1.
    code, out, err = await cli("status", "-o", "json", "-c", path)
    st = json.loads(out)
    assert code == 1 and st["monitor"]["running"] is False, (out, err)
    # Its weights differ from the config's: reported as the fleet's state once the monitor's failover
    # has ended (failed over on purpose), as a drift while it still watches its objective.
    drift = any("differ from the config" in p for p in st["problems"])
    assert drift or st.get("failed_over", {}).get("target") == "us-east-1", (
        st["problems"],
        st.get("failed_over"),
    )


Status = Callable[[], Awaitable[MonitorStatus]]


async def _at_least(status: Status, n: int) -> bool:
    return (await status()).probe_rounds >= n


async def _paused(status: Status) -> bool:
    return (await status()).paused


async def _failed_over(status: Status) -> MonitorStatus | None:
    st = await status()
    return st if st.last_failover is not None and st.last_failover.status == "succeeded" else None
