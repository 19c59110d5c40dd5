"""A quorum of vantage points on the dev stack: a partitioned worker cannot fail a region over.

Two workers, as two regions' machines would run them. Worker A serves only the main queue (the
monitor and its own probe); its probes leave from 127.0.0.2 (health.probe_source_address). Worker
B serves both regions' queues from the default address. The dev stack's partition fault makes
us-west-1's gateway refuse connections from 127.0.0.2, as a firewall between A and that region
would. Cut: A sees us-west-1 DOWN, us-east-1's worker sees it healthy, so 1 of 2 voters is not a
majority: no failover, the vote and NO_QUORUM are shown, and re-votes back off. Then us-west-1
really fails: both vantage points agree and the monitor fails over.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client

from drctl.config.schema import FleetConfig, NotificationsConfig, WebhookConfig
from drctl.models.health import RegionState
from drctl.models.monitor import MonitorStatus
from drctl.models.quorum import MAIN, NO_QUORUM
from drctl.worker.process import run_worker
from tests.support.cli import cli
from tests.support.config import write_config
from tests.support.receiver import Receiver, receiver
from tests.support.wait import assert_eventually
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

WEST, EAST = "us-west-1", "us-east-1"


A_ADDRESS = "127.0.0.2"  # worker A's probes leave from here; loopback, like every test address


def _from(cfg: FleetConfig, address: str) -> FleetConfig:
    """`cfg` with its probes leaving from `address` (the same queues: the same fleet, another path)."""
    return cfg.model_copy(update={"health": cfg.health.model_copy(update={"probe_source_address": address})})


# Both loops: with the watcher nothing returns while us-west-1 stays UNHEALTHY, so the re-vote
# must wake the monitor by itself (its back-off is one of the watcher's due times).
@pytest.mark.parametrize("watcher", [False, True], ids=["rounds", "watcher"])
async def test_a_partitioned_worker_cannot_fail_over_a_healthy_region_and_a_real_fault_still_fails_over(
    temporal_client: Client,
    fleet_config: FleetConfig,
    fleet_config_path: Path,
    reset_fleet: None,
    watcher: bool,
) -> None:
    cfg = fast_config(fleet_config, failure_threshold=2, recovery_threshold=1, watcher=watcher)
    assert cfg.health.quorum.mode == "majority"  # the default, under test
    stops = [asyncio.Event(), asyncio.Event()]
    tasks: list[asyncio.Task[None]] = []
    try:
        # A: main queue only, probing from A_ADDRESS. B: the region queues, default address.
        tasks.append(
            asyncio.create_task(
                run_worker(
                    _from(cfg, A_ADDRESS), [], main=True, client=temporal_client, stop=stops[0], http_port=0
                )
            )
        )
        tasks.append(
            asyncio.create_task(
                run_worker(cfg, None, main=False, client=temporal_client, stop=stops[1], http_port=0)
            )
        )
        mon = await monitor_handle(temporal_client, cfg)
        await assert_eventually(
            lambda: healthy_rounds(mon, 2),
            timeout_s=30,
            interval_s=0.2,
            what="two probe rounds by A, both regions HEALTHY",
        )

        # The dev stack's partition fault: us-west-1's gateway refuses A's address.
        assert admin(cfg, WEST, "/faults/partition", {"sources": [A_ADDRESS]}) == {"partitioned": [A_ADDRESS]}
        assert admin(cfg, WEST, "/faults")["partitioned"] == [A_ADDRESS]

        async def no_quorum() -> MonitorStatus | None:
            st = await monitor_status(mon)
            vote = st.votes.get(WEST)
            return st if vote is not None and st.alert == NO_QUORUM else None

        st = await assert_eventually(no_quorum, timeout_s=30, interval_s=0.3, what="a vote without quorum")
        vote = st.votes[WEST]
        assert st.regions[WEST].state is RegionState.UNHEALTHY  # A's own view: down
        assert vote.views[MAIN].startswith("down:") and vote.views[EAST] == "healthy", vote
        assert (vote.down, vote.voters, vote.verdict) == (1, 2, "no_quorum")
        assert "connect" in st.regions[WEST].last_reason or "refused" in st.regions[WEST].last_reason, (
            st.regions
        )

        # It stays so: votes again only after a growing back-off, and never fails over.
        async def revoted() -> MonitorStatus | None:
            s = await monitor_status(mon)
            v = s.votes.get(WEST)
            return s if v is not None and v.backoff_s >= 2 * cfg.health.interval_s else None

        st = await assert_eventually(revoted, timeout_s=30, interval_s=0.3, what="a re-vote, backed off")
        assert st.alert == NO_QUORUM and st.active_failover is None and st.last_failover is None
        assert not st.failed_over and weights(cfg) == cfg.weights

        path = str(write_config(cfg, fleet_config_path.parent))
        code, out, err = await cli("monitor", "status", "-c", path)
        assert code == 0, (out, err)
        assert f"ALERT {NO_QUORUM}" in out and f"vote on {WEST}" in out, out
        assert "main: down" in out and f"{EAST}: healthy" in out and "1/2 see it down" in out, out

        # A real fault: us-west-1 loses every replica. Both vantage points see it: failover.
        # (The partition stays: A still sees it down; B now does too.)
        admin(cfg, WEST, "/faults/replicas", {"action": "kill", "track": "stable", "stay_down": True})

        async def failed_over() -> MonitorStatus | None:
            s = await monitor_status(mon)
            return s if s.failed_over else None

        st = await assert_eventually(failed_over, timeout_s=90, interval_s=0.5, what="failover by majority")
        vote = st.votes[WEST]
        assert vote.verdict == "confirmed" and vote.views[EAST].startswith("down:"), vote
        assert st.failed_over[0].source == WEST and st.failed_over[0].target == EAST
        assert weights(cfg) == {WEST: 0, EAST: 100}
    finally:
        admin(cfg, WEST, "/faults/partition", {"sources": []})
        for stop in stops:
            stop.set()
        await terminate_fleet_workflows(temporal_client, cfg)
        for task in tasks:
            await asyncio.wait_for(task, 30)


async def test_a_peer_without_a_worker_is_a_missing_vote_and_with_two_regions_blocks_the_failover(
    start_workers: StartWorkers, temporal_client: Client, fleet_config: FleetConfig
) -> None:
    """us-east-1's queue has no worker: its vote is missing, never healthy and never down; 1 of 2 is
    no majority, so us-west-1, really down, is not failed over automatically. The UI says why, and,
    with the watcher (nothing returns from it for a vote), the NO_QUORUM alert still reaches the webhook."""
    with receiver() as rec:
        base = fast_config(fleet_config, failure_threshold=2, recovery_threshold=1, watcher=True)
        hook = WebhookConfig(name="chat", format="slack", url=rec.url + "/slack", events=["alert.raised"])
        cfg = await start_workers(
            regions=[WEST],
            cfg=base.model_copy(update={"notifications": NotificationsConfig(webhooks=[hook])}),
        )
        mon = await monitor_handle(temporal_client, cfg)
        admin(cfg, WEST, "/faults/replicas", {"action": "kill", "track": "stable", "stay_down": True})

        async def no_quorum() -> MonitorStatus | None:
            st = await monitor_status(mon)
            return st if WEST in st.votes and st.alert == NO_QUORUM else None

        st = await assert_eventually(no_quorum, timeout_s=40, interval_s=0.3, what="a vote without quorum")
        view = st.votes[WEST].views[EAST]
        assert view == f"missing: no worker on {cfg.region(EAST).queue} took the probe within 3s", view
        assert st.votes[WEST].views[MAIN].startswith("down:") and st.votes[WEST].down == 1
        assert st.last_failover is None and st.active_failover is None and weights(cfg) == cfg.weights
        # The Temporal UI's details for the monitor show the alert and each vantage point's view.
        meta = await mon.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        details = meta.current_details
        assert NO_QUORUM in details and f"{EAST}: missing: " in details and "1/2 see it down" in details, (
            details
        )
        await assert_eventually(lambda: _posted(rec), timeout_s=20, interval_s=0.3, what="NO_QUORUM webhook")
    assert rec.bodies("/slack")[0]["text"].startswith(
        f":rotating_light: [{cfg.name}] {NO_QUORUM}: us-west-1 "
    )


async def _posted(rec: Receiver) -> bool:
    return bool(rec.bodies("/slack"))


async def test_other_regions_are_asked_while_the_region_is_suspect_and_their_down_views_count_at_the_vote(
    start_workers: StartWorkers, temporal_client: Client
) -> None:
    """The early vote: us-east-1's worker is asked about us-west-1 when it turns SUSPECT, in parallel
    with the monitor's confirming probes, so the vote at UNHEALTHY asks nobody again: its 'down'
    view, still fresh, is counted. One peer probe in the history, scheduled before the UNHEALTHY return."""
    cfg = await start_workers(failure_threshold=3, recovery_threshold=1, watcher=True)
    mon = await monitor_handle(temporal_client, cfg)
    admin(cfg, WEST, "/faults/replicas", {"action": "kill", "track": "stable", "stay_down": True})

    async def failed_over() -> MonitorStatus | None:
        st = await monitor_status(mon)
        return st if st.failed_over else None

    st = await assert_eventually(failed_over, timeout_s=60, interval_s=0.3, what="failover by majority")
    assert st.votes[WEST].verdict == "confirmed" and st.votes[WEST].views[EAST].startswith("down:"), st.votes
    peer_probes, unhealthy_at = [], None
    async for e in mon.fetch_history_events():
        if e.HasField("activity_task_scheduled_event_attributes"):
            a = e.activity_task_scheduled_event_attributes
            if a.activity_type.name == "probe_regions" and a.task_queue.name == cfg.region(EAST).queue:
                peer_probes.append(e.event_id)
        elif e.HasField("activity_task_completed_event_attributes") and unhealthy_at is None:
            if b'"UNHEALTHY"' in e.activity_task_completed_event_attributes.result.payloads[0].data:
                unhealthy_at = e.event_id
    assert unhealthy_at is not None and len(peer_probes) == 1 and peer_probes[0] < unhealthy_at, (
        peer_probes,
        unhealthy_at,
    )
