"""Failover against the real dev stack: manual (static stability), automatic, exclusion, both down."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from activities.chaos import _load as user_load
from drctl.client import operations
from drctl.client.operations import FleetBusyError, running_operations, start_operation
from drctl.client.outcome import finished, result_of
from drctl.config.schema import FleetConfig
from drctl.devstack import processes, stack
from drctl.devstack.restart import restart_global_gateway
from drctl.models import search_attributes as sa
from drctl.models.drill import LoadSample
from drctl.models.failover import FailoverInput, FailoverResult
from drctl.models.fleet_spec import FleetSpec
from drctl.models.health import RegionState
from drctl.models.monitor import ALL_REGIONS_UNHEALTHY, MonitorStatus
from drctl.providers.auth import auth_headers
from drctl.providers.kubernetes import MERGE, KubernetesPlatform
from tests.support.wait import assert_eventually, until
from tests.support.workers import (
    StartWorkers,
    admin,
    healthy_fleet,
    kill_stable,
    monitor_status,
    outage_failover,
    replicas,
    served_by,
    start_failover,
    weights,
)
from workflows.failover import Failover

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


async def test_manual_failover_completes_without_the_source_regions_worker(
    start_workers: StartWorkers, temporal_client: Client, request: pytest.FixtureRequest
) -> None:
    # Static stability: only the main queue and us-east-1's queue have a worker.
    cfg = await start_workers(regions=["us-east-1"])
    # The target's stable Deployment and its HPA are also Argo CD's (docs/gitops.md): the result
    # must say so, for each field the pre-scale wrote.
    east = KubernetesPlatform(cfg.region("us-east-1"))
    stable = cfg.workload.deployment_name("stable")
    tracking = {"argocd.argoproj.io/tracking-id": f"llm-us-east-1:apps/Deployment:{east.namespace}/{stable}"}
    hpa_id = {"argocd.argoproj.io/tracking-id": f"llm-us-east-1:autoscaling/HorizontalPodAutoscaler:{stable}"}
    marked = {"metadata": {"annotations": tracking}}
    east.apps.patch_namespaced_deployment(stable, east.namespace, marked, _content_type=MERGE)
    hpa = {"metadata": {"annotations": hpa_id}}
    east.autoscaling.patch_namespaced_horizontal_pod_autoscaler(
        stable, east.namespace, hpa, _content_type=MERGE
    )
    untracked = {"metadata": {"annotations": {k: None for k in tracking}}}

    def unmark() -> None:
        east.apps.patch_namespaced_deployment(stable, east.namespace, untracked, _content_type=MERGE)
        east.autoscaling.patch_namespaced_horizontal_pod_autoscaler(
            stable, east.namespace, untracked, _content_type=MERGE
        )

    request.addfinalizer(unmark)
    hpa_max = east.get_deployment(stable).hpa_max_replicas or 0
    handle = await start_failover(temporal_client, cfg)
    res = await asyncio.wait_for(handle.result(), 90)
    target = res.target_replicas or 0
    assert [(g.region, g.kind, g.name, g.field) for g in res.gitops_managed] == [
        ("us-east-1", "Deployment", stable, "spec.replicas"),
        ("us-east-1", "HorizontalPodAutoscaler", stable, "spec.minReplicas"),
    ] + [("us-east-1", "HorizontalPodAutoscaler", stable, "spec.maxReplicas")] * (target > hpa_max)
    assert (
        res.gitops_managed[1].tracking
        == f"argocd.argoproj.io/tracking-id={hpa_id['argocd.argoproj.io/tracking-id']}"
    )
    assert res.status == "succeeded", res.error
    assert res.source == "us-west-1"
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
    assert await served_by(cfg) == {"us-east-1": 20}
    assert replicas(cfg, "us-east-1") == 4  # its 2 + us-west-1's 2, which carried the moved share
    assert [p.phase for p in res.phases][:5] == ["claim", "preflight", "scale", "shift", "verify"]
    assert res.rto_s is not None and res.verify is not None and res.verify.by_region == {"us-east-1": 10}
    # No user load moved (only the verification's own requests, before the watch): nothing to judge
    # the objective by, which is said after one window rather than waited out to the RTO target.
    assert res.slo_met is None and res.slo_restored_s is None, res.slo_evidence
    evidence = res.slo_evidence or ""
    assert (
        evidence.startswith("no traffic to judge in ")
        and "no request reached the target's replicas" in evidence
    )
    assert [p.phase for p in res.phases][-2:] == ["verify", "slo"]


async def test_failover_under_load_reports_slo_restored_beside_the_rto(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers()
    samples: list[LoadSample] = []
    # The drills' bounded open-loop load through the global endpoint: the load that moves.
    load = asyncio.create_task(
        user_load(cfg, 10.0, time.monotonic() + 60, samples, auth_headers(cfg), cfg.health.probe_timeout_s)
    )
    try:
        await asyncio.sleep(1)
        res = await asyncio.wait_for((await start_failover(temporal_client, cfg)).result(), 90)
    finally:
        load.cancel()
        await asyncio.gather(load, return_exceptions=True)
    assert res.status == "succeeded", res.error
    assert res.slo_met is True, res.slo_evidence
    # Served elsewhere first, then the objective held (its window is 2 s in the test fleet).
    assert res.rto_s is not None and res.slo_restored_s is not None
    assert res.rto_s <= res.slo_restored_s <= res.rto_target_s, res
    evidence = res.slo_evidence or ""
    assert evidence.startswith(f"restored {res.slo_restored_s:.1f}s after the fault: ttft_p99 <= "), evidence
    assert "(objective 200 ms)" in evidence and "held 2." in evidence, evidence
    assert any(s.region == "us-east-1" for s in samples)


async def test_a_global_tier_restarted_mid_failover_keeps_the_shifted_weights(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig, fleet_config_path: Path
) -> None:
    """The global HAProxy restarts while a Failover runs, once its shift is in effect (the Failover
    is verifying through it, which it retries while the tier is away). The restarted process loads
    the shifted weights from its server-state file; drctl writes nothing to put them back, and the
    failover ends succeeded with the traffic where it moved it."""
    cfg = await start_workers()
    shifted = {"us-west-1": 0, "us-east-1": 100}
    handle = await start_failover(temporal_client, cfg)
    await until(lambda: weights(cfg) == shifted, "the failover's shift in effect", timeout_s=60)
    before = processes.read_pid(stack.state_dir(fleet_config) / "pids" / "haproxy-global.pid")
    assert (await handle.describe()).status is WorkflowExecutionStatus.RUNNING  # mid-failover
    after = await asyncio.to_thread(restart_global_gateway, fleet_config, fleet_config_path)
    assert after != before and processes.pid_alive(after)
    assert weights(cfg) == shifted  # read from the new process, before the failover ends
    res = await asyncio.wait_for(handle.result(), 90)
    assert res.status == "succeeded", res.error
    assert weights(cfg) == shifted
    assert await served_by(cfg) == {"us-east-1": 20}


async def test_second_failover_is_refused_naming_the_first(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg = await start_workers()
    spec = FleetSpec.from_config(cfg)
    first = await start_failover(temporal_client, cfg, spec=spec, require_approval=True)
    await assert_eventually(
        lambda: _phase(first, "awaiting-approval"), timeout_s=20, what="first at its gate"
    )
    # Through the client-side check: refused with the first's id and UI link.
    with pytest.raises(FleetBusyError) as busy:
        await start_operation(
            temporal_client,
            cfg,
            Failover.run,
            FailoverInput(spec=spec, target="us-west-1"),
            operation="failover",
            workflow_id=f"failover/{cfg.name}-other",
        )
    assert f"failover/{cfg.name}" in str(busy.value) and cfg.temporal.ui_url in str(busy.value)
    # Past the client-side check (a racing client): the workflow's own claim refuses it.
    second = await temporal_client.start_workflow(
        Failover.run,
        FailoverInput(spec=spec, target="us-west-1"),
        id=f"failover/{cfg.name}-race",
        task_queue=cfg.temporal.task_queue,
        search_attributes=operations.search_attributes(cfg.name, "failover"),
    )
    # The fleet lock refuses it; it ends Failed (red in the UI) with FleetBusy, its result in the details.
    refused = await asyncio.wait_for(finished(second, FailoverResult), 30)
    res = refused.result
    assert refused.failed and refused.busy
    assert res.status == "refused" and f"failover/{cfg.name}" in (res.error or "")
    assert weights(cfg) == cfg.weights  # neither moved anything
    # Started without an initiator, as drctl before DrctlInitiator did: listed as not recorded.
    listed = await operations.list_operations(
        temporal_client, cfg.name, f"WorkflowId = 'failover/{cfg.name}-race'", cfg
    )
    assert [(o.workflow_id, o.initiator) for o in listed] == [(f"failover/{cfg.name}-race", None)]
    desc = await first.describe()
    assert desc.typed_search_attributes.get(sa.INITIATOR) == temporal_client.identity
    await first.execute_update("abort", {"reason": "test done"}, result_type=str)
    aborted = await result_of(first, FailoverResult)
    assert aborted.status == "aborted" and weights(cfg) == cfg.weights

    async def none_running() -> bool:
        return not await running_operations(temporal_client, cfg)

    # Visibility is eventually consistent: a closed workflow can still list as running for a moment.
    await assert_eventually(none_running, timeout_s=10, what="no operation listed as running")


async def _phase(handle: object, phase: str) -> bool:
    from drctl.models.phases import OperationProgress

    p = await handle.query("progress", result_type=OperationProgress)  # type: ignore[attr-defined]
    return p.phase == phase


async def test_region_down_fails_over_automatically_then_fails_back(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg, mon = await healthy_fleet(start_workers, temporal_client)
    res = await outage_failover(temporal_client, cfg, mon, what="automatic failover")
    # An automatic failover records the monitor as its initiator.
    desc = await temporal_client.get_workflow_handle(f"failover/{cfg.name}").describe()
    monitor = f"drctl-monitor@monitor/{cfg.name}"
    assert desc.typed_search_attributes.get(sa.INITIATOR) == monitor
    assert await desc.static_summary() == f"automatic failover us-west-1 → us-east-1 by {monitor}"
    assert res.status == "succeeded" and res.source == "us-west-1" and res.target == "us-east-1"
    assert res.rto_s is not None and res.rto_s < cfg.objectives.rto_target_s, res
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
    assert await served_by(cfg) == {"us-east-1": 20}
    await until(lambda: replicas(cfg, "us-east-1") == 4, timeout_s=30, what="us-east-1 scaled up")

    admin(cfg, "us-west-1", "/faults/clear")
    await until(lambda: weights(cfg) == cfg.weights, timeout_s=90, interval_s=0.5, what="failback to 60/40")
    await until(lambda: replicas(cfg, "us-east-1") == 2, timeout_s=30, what="us-east-1 scaled back")
    counts = await served_by(cfg, 40)
    assert set(counts) == {"us-west-1", "us-east-1"}, counts


async def test_flapping_replica_causes_no_failover(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg, mon = await healthy_fleet(start_workers, temporal_client)
    start = (await monitor_status(mon)).probe_rounds
    seen: set[str] = set()
    failing: list[float] = []
    reasons: list[str] = []

    async def watch_for(seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            st = await monitor_status(mon)
            west = st.regions["us-west-1"]
            seen.add(west.last_status.value if west.last_status else "-")
            failing.append(west.last_failing_fraction)
            reasons.append(west.last_reason)
            assert west.state is not RegionState.UNHEALTHY and st.active_failover is None, st
            await asyncio.sleep(0.3)  # sampling cadence of the observation, not a wait for a result

    # A replica that dies and is replaced, again and again...
    for _ in range(3):
        assert admin(cfg, "us-west-1", "/faults/replicas", {"action": "kill", "track": "stable", "count": 1})[
            "affected"
        ]
        await watch_for(2)
    # ...and one that stays dead for several probe rounds while the gateway keeps serving.
    admin(
        cfg,
        "us-west-1",
        "/faults/replicas",
        {"action": "kill", "track": "stable", "count": 1, "stay_down": True},
    )
    await watch_for(8)
    # The probe did see the lost replica (not vacuous): as DEGRADED, as a failing share, or, once its
    # EndpointSlice lists it not ready, as a replica coming back ("loading": capacity coming).
    assert "DEGRADED" in seen or max(failing) > 0 or any("loading" in r for r in reasons), (seen, failing)

    async def probed_on() -> MonitorStatus | None:  # the live view trails the watcher by a heartbeat
        st = await monitor_status(mon)
        return st if st.probe_rounds >= start + 6 else None

    st = await assert_eventually(probed_on, timeout_s=15, interval_s=0.5, what="six more probe rounds")
    assert not st.failed_over and st.last_failover is None, st
    assert weights(cfg) == cfg.weights


async def test_both_regions_down_never_zero_everywhere(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    cfg, mon = await healthy_fleet(start_workers, temporal_client)
    for region in cfg.region_names:
        kill_stable(cfg, region)
    samples: list[dict[str, int]] = []

    async def alerted() -> bool:
        samples.append(weights(cfg))
        return (await monitor_status(mon)).alert == ALL_REGIONS_UNHEALTHY

    await assert_eventually(alerted, timeout_s=30, interval_s=0.2, what="ALL_REGIONS_UNHEALTHY")
    for _ in range(10):  # keep sampling a few more rounds: the alert must hold and nothing move
        await alerted()
        await asyncio.sleep(0.3)
    assert all(sum(s.values()) > 0 for s in samples) and all(s == cfg.weights for s in samples)
    st = await monitor_status(mon)
    assert st.alert == ALL_REGIONS_UNHEALTHY and st.last_failover is None
    desc = await temporal_client.get_workflow_handle(f"monitor/{cfg.name}").describe()
    assert desc.typed_search_attributes.get(sa.PHASE) == ALL_REGIONS_UNHEALTHY


@pytest.mark.parametrize("watcher", [True, False], ids=["watcher", "rounds"])
async def test_monitor_continues_as_new_keeping_its_state(
    start_workers: StartWorkers, temporal_client: Client, watcher: bool
) -> None:
    from drctl.models.monitor import MonitorInput
    from workflows.monitor import FleetMonitor

    cfg = await start_workers(interval_s=1.5, watcher=watcher)
    # A paused watcher monitor turns once per checkpoint: 1.5 s here (the config allows 10 s and up).
    spec = FleetSpec.from_config(cfg).model_copy(update={"watcher_checkpoint_s": 1.5})
    handle = await temporal_client.start_workflow(
        FleetMonitor.run,
        MonitorInput(spec=spec, max_iterations=2),
        id=f"monitor/{cfg.name}",
        task_queue=cfg.temporal.task_queue,
        search_attributes=operations.search_attributes(cfg.name, "monitor"),
    )
    await temporal_client.get_workflow_handle(handle.id).signal("pause")  # state that must survive

    async def continued() -> MonitorStatus | None:
        desc = await temporal_client.get_workflow_handle(handle.id).describe()
        st = await monitor_status(temporal_client.get_workflow_handle(handle.id))
        return st if desc.run_id != handle.first_execution_run_id and st.iteration >= 3 else None

    st = await assert_eventually(continued, timeout_s=30, interval_s=0.3, what="monitor continued as new")
    assert st.paused  # carried across continue-as-new
