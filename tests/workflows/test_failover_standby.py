"""Failover on infrastructure as users run it: a warm standby at weight 0, a target region whose
worker is dead, and a monitor that follows a changed config."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from drctl.client.operations import running_operations
from drctl.client.outcome import result_of
from drctl.config.quorum import QuorumConfig
from drctl.config.schema import FleetConfig
from drctl.models import search_attributes as sa
from drctl.models.failover import FailoverResult
from drctl.models.fleet_spec import FleetSpec, RegionSpec
from drctl.models.monitor import NO_FAILOVER_TARGET, REGION_UNRESOLVED, MonitorStatus
from drctl.models.monitor_config import SpecUpdate
from drctl.providers.traffic_factory import global_traffic
from tests.support.cli import drctl
from tests.support.config import tuned, write_config
from tests.support.wait import assert_eventually, until
from tests.support.workers import (
    StartWorkers,
    admin,
    fast_config,
    healthy_fleet,
    kill_stable,
    monitor_handle,
    monitor_status,
    outage_failover,
    replicas,
    served_by,
    start_failover,
    until_healthy,
    weights,
)
from workflows.calls import QUEUE_WAIT_S

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


async def region_calls(client: Client, workflow_id: str, main_queue: str) -> list[tuple[str, float]]:
    """(activity, schedule-to-start seconds) of every activity the workflow sent to a region's queue."""
    out = []
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    for e in history.events:
        if e.HasField("activity_task_scheduled_event_attributes"):
            a = e.activity_task_scheduled_event_attributes
            if a.task_queue.name != main_queue:
                out.append((a.activity_type.name, a.schedule_to_start_timeout.ToTimedelta().total_seconds()))
    return out


def active_passive(cfg: FleetConfig) -> FleetConfig:
    """us-west-1 serves everything with 3 replicas; us-east-1 is a warm standby at weight 0."""
    sizes = {"us-west-1": (100, 3), "us-east-1": (0, 2)}
    return cfg.model_copy(
        update={
            "regions": [
                r.model_copy(update={"weight": sizes[r.name][0], "replicas": sizes[r.name][1]})
                for r in cfg.regions
            ],
            "failover": cfg.failover.model_copy(update={"policy": "automatic"}),
        }
    )


async def test_active_passive_fleet_fails_over_to_the_standby_and_the_monitor_follows_the_config(
    start_workers: StartWorkers, temporal_client: Client, fleet_config_path: Path
) -> None:
    cfg = await start_workers()
    # The monitor started weeks ago from the active-active config...
    mon = await monitor_handle(temporal_client, cfg)
    await until_healthy(mon)
    # ...and the fleet is now active-passive: `drctl monitor start` with the new file updates it.
    ap = active_passive(cfg)
    global_traffic(ap).set_weights(ap.weights)
    proc = await asyncio.to_thread(
        drctl, "monitor", "start", "-c", str(write_config(ap, fleet_config_path.parent))
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "updated" in proc.stdout and "us-east-1.weight: 40 → 0" in proc.stdout, proc.stdout
    st = await monitor_status(mon)
    assert (
        st.weights == {"us-west-1": 100, "us-east-1": 0} and st.iteration >= 1
    )  # same run: the update ended a turn
    again = await asyncio.to_thread(
        drctl, "monitor", "start", "-c", str(write_config(ap, fleet_config_path.parent))
    )
    assert again.returncode == 0 and "follows this config already" in again.stdout, again.stdout
    # A config the running monitor cannot follow is refused with the reason, and changes nothing.
    moved = tuned(ap, "temporal", task_queue="elsewhere")
    bad = await asyncio.to_thread(
        drctl, "monitor", "start", "-c", str(write_config(moved, fleet_config_path.parent))
    )
    assert bad.returncode == 2 and "task_queue" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    assert (await monitor_status(mon)).weights == {"us-west-1": 100, "us-east-1": 0}

    res = await outage_failover(temporal_client, cfg, mon, what="automatic failover to the standby")
    assert res.status == "succeeded", res.error
    assert res.source == "us-west-1" and res.target == "us-east-1" and res.plan is not None
    assert res.rto_s is not None and res.rto_s < cfg.objectives.rto_target_s, res
    # Sized from the source's 3 serving replicas, not refused as "needs 1000000".
    assert res.plan.target_replicas_needed == 3 and res.plan.problems == []
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
    assert await served_by(cfg) == {"us-east-1": 20}
    await until(lambda: replicas(cfg, "us-east-1") == 3, timeout_s=30, what="standby scaled to 3")

    # Failback returns to the weights of the config the monitor follows now (100/0), not the old 60/40.
    admin(cfg, "us-west-1", "/faults/clear")
    await until(
        lambda: weights(cfg) == {"us-west-1": 100, "us-east-1": 0},
        timeout_s=90,
        interval_s=0.5,
        what="failback to the configured 100/0",
    )
    # No wait without a bound: every call to a region's queue carried a schedule-to-start timeout.
    calls = [
        c
        for wid in (f"failover/{cfg.name}", f"failback/{cfg.name}")
        for c in await region_calls(temporal_client, wid, cfg.temporal.task_queue)
    ]
    assert all(0 < s <= 60 for _, s in calls), calls
    assert {"get_global_weights", "set_global_weights", "verify_global", "get_capacity"} <= {
        n for n, _ in calls
    }, calls


async def test_failover_to_a_region_without_a_worker_fails_fast_naming_the_queue(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers(regions=["us-west-1"])  # us-east-1's worker is down
    started = time.monotonic()
    handle = await start_failover(temporal_client, cfg)
    res = await asyncio.wait_for(result_of(handle, FailoverResult), 120)
    took = time.monotonic() - started
    # Failed by one bounded queue wait, not by retrying an activity nobody picks up.
    assert res.status == "failed" and took < 3 * QUEUE_WAIT_S, (took, res)
    assert cfg.region("us-east-1").queue in (res.error or "") and "no worker" in (res.error or ""), res.error
    assert weights(cfg) == cfg.weights  # nothing moved
    assert not await running_operations(temporal_client, cfg)  # the fleet is released


async def test_abort_during_preflight_ends_the_failover(
    start_workers: StartWorkers, temporal_client: Client, fleet_config_path: Path
) -> None:
    cfg = await start_workers(regions=["us-west-1"])  # preflight waits on us-east-1's queue
    handle = await start_failover(temporal_client, cfg)

    async def in_preflight() -> bool:
        from drctl.models.phases import OperationProgress

        return (await handle.query("progress", result_type=OperationProgress)).phase == "preflight"

    await assert_eventually(in_preflight, timeout_s=20, interval_s=0.1, what="failover in preflight")
    started = time.monotonic()
    proc = await asyncio.to_thread(
        drctl,
        "ops",
        "abort",
        handle.id,
        "--reason",
        "wrong region",
        "--yes",
        "-c",
        str(write_config(cfg, fleet_config_path.parent)),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = await asyncio.wait_for(result_of(handle, FailoverResult), 20)
    assert res.status == "aborted" and "wrong region" in (res.error or "")
    assert time.monotonic() - started < QUEUE_WAIT_S  # ended by the abort, before the queue wait could end it
    assert weights(cfg) == cfg.weights


async def _with_unresolved_region(
    start_workers: StartWorkers, client: Client, keep_east: bool
) -> tuple[FleetConfig, Any, list[str]]:
    """A monitor that saw both regions healthy, then was told of eu-west-9, which no worker resolves
    (and, unless keep_east, told to forget us-east-1): (config, monitor handle, the changes it reported)."""
    cfg, mon = await healthy_fleet(start_workers, client)
    spec = FleetSpec.from_config(cfg)
    extra = RegionSpec(name="eu-west-9", weight=40, replicas=2, max_replicas=8, queue="drctl-eu-west-9")
    kept = [r for r in spec.regions if keep_east or r.name != "us-east-1"]
    changes = await mon.execute_update(  # type: ignore[attr-defined]
        "update_spec",
        SpecUpdate(spec=spec.model_copy(update={"regions": [*kept, extra]})),
        result_type=list[str],
    )
    return cfg, mon, changes


async def test_monitor_alerts_on_a_region_the_worker_cannot_resolve(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg, mon, changes = await _with_unresolved_region(start_workers, temporal_client, keep_east=True)
    assert "regions added: eu-west-9" in changes

    # The known regions are still probed while the alert stands (with the watcher: its next call,
    # seen in the live view), and the alert is in the UI's phase.
    async def alerted() -> MonitorStatus | None:
        s = await monitor_status(mon)
        probed = all(s.regions[r].last_probed_at is not None for r in cfg.region_names)
        return s if s.alert == REGION_UNRESOLVED and probed else None

    st = await assert_eventually(
        alerted, timeout_s=20, interval_s=0.3, what="REGION_UNRESOLVED alert, known regions probed"
    )
    assert "eu-west-9" in st.unresolved["eu-west-9"] and "us-west-1" in st.unresolved["eu-west-9"]
    desc = await temporal_client.get_workflow_handle(f"monitor/{cfg.name}").describe()
    assert desc.typed_search_attributes.get(sa.PHASE) == REGION_UNRESOLVED


async def test_an_unhealthy_region_whose_only_peer_is_unresolved_alerts_no_failover_target(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    # The monitor watches us-west-1 and a region this worker cannot resolve: when us-west-1 fails
    # there is nowhere to send its traffic, and the alert says so instead of "every region unhealthy".
    cfg, mon, _ = await _with_unresolved_region(start_workers, temporal_client, keep_east=False)
    kill_stable(cfg, "us-west-1")

    async def alerted() -> MonitorStatus | None:
        s = await monitor_status(mon)
        return s if s.alert == NO_FAILOVER_TARGET else None

    st = await assert_eventually(alerted, timeout_s=30, interval_s=0.3, what="NO_FAILOVER_TARGET alert")
    assert st.regions["us-west-1"].state.value == "UNHEALTHY" and "eu-west-9" in st.unresolved
    assert st.active_failover is None and st.last_failover is None  # nothing was started
    assert weights(cfg) == cfg.weights


async def test_monitor_failover_to_a_dead_worker_fails_fast_and_is_not_retried_at_once(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    # Two regions, us-east-1's worker down: the monitor's failover fails naming the queue, and the
    # monitor marks us-east-1 to be avoided (with a third region it would go there next; here it can
    # only retry after its back-off, never every round). Quorum off, on purpose: with two regions a
    # dead us-east-1 worker is a missing vote, and the majority vote would stop the failover before it
    # starts (tests/workflows/test_monitor_quorum.py); this test is about the failover's queue wait.
    cfg = await start_workers(regions=["us-west-1"], quorum=QuorumConfig(mode="off"))
    mon = await monitor_handle(temporal_client, cfg)
    await until_healthy(mon)
    kill_stable(cfg, "us-west-1")
    started = time.monotonic()

    async def failed() -> MonitorStatus | None:
        s = await monitor_status(mon)
        return s if s.last_failover and s.last_failover.status not in ("running",) else None

    st = await assert_eventually(failed, timeout_s=120, interval_s=0.5, what="the monitor's failover to end")
    # detection (a few probe rounds) + the bounded queue wait, not a wait per retry
    assert time.monotonic() - started < 3 * QUEUE_WAIT_S + 20
    assert st.last_failover is not None and st.last_failover.target == "us-east-1"
    assert st.last_failover.status != "succeeded" and "us-east-1" in st.avoid_targets
    res = await result_of(temporal_client.get_workflow_handle(f"failover/{cfg.name}"), FailoverResult)
    assert cfg.region("us-east-1").queue in (res.error or ""), res.error
    await asyncio.sleep(5)  # several probe rounds (2 s interval): no new failover inside the back-off
    again = await monitor_status(mon)
    assert again.active_failover is None and again.last_failover == st.last_failover
    assert weights(cfg) == cfg.weights


async def test_target_at_max_replicas_refused_normally_but_an_emergency_shifts_and_reports_the_shortfall(
    start_workers: StartWorkers, fleet_config_path: Path, fleet_config: FleetConfig
) -> None:
    base = fast_config(fleet_config)
    cfg = await start_workers(
        cfg=base.model_copy(
            update={
                "regions": [
                    r.model_copy(update={"max_replicas": 3}) if r.name == "us-east-1" else r
                    for r in base.regions
                ]
            }
        )
    )
    path = str(write_config(cfg, fleet_config_path.parent))
    normal = await asyncio.to_thread(drctl, "failover", "--to", "us-east-1", "--yes", "-c", path)
    assert normal.returncode == 1, normal.stdout + normal.stderr
    flat = " ".join(normal.stdout.split())  # the table wraps long errors
    assert "needs 4 replicas" in flat and "max_replicas 3" in flat and "--force" in flat, normal.stdout
    assert weights(cfg) == cfg.weights

    emergency = await asyncio.to_thread(
        drctl, "failover", "--to", "us-east-1", "--emergency", "--yes", "-c", path
    )
    assert emergency.returncode == 0, emergency.stdout + emergency.stderr
    assert "capacity shortfall" in emergency.stdout and "succeeded" in emergency.stdout, emergency.stdout
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
    await until(lambda: replicas(cfg, "us-east-1") == 3, timeout_s=30, what="us-east-1 at its max")
