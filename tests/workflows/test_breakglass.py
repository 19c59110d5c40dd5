"""`drctl failover --break-glass` with Temporal gone, then `drctl failover-import` once it is back.

Temporal is made unreachable by pointing a copy of the fleet config at a closed loopback port; the
global tier (the dev stack's HAProxy), the target's cluster and moto's S3 stay real.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from drctl.client.identity import identity
from drctl.config.schema import FleetConfig, HAProxyGlobal
from drctl.devstack import stack
from drctl.models import search_attributes as sa
from drctl.models.monitor import MonitorStatus
from drctl.models.monitor_decisions import DecisionsView
from drctl.providers import aws
from drctl.providers.haproxy_runtime import HAProxyRuntime
from drctl.providers.traffic_factory import global_traffic
from tests.support.cli import cli
from tests.support.config import tuned, write_config
from tests.support.ports import free_port
from tests.support.wait import assert_eventually
from tests.support.workers import (
    StartWorkers,
    fast_config,
    monitor_handle,
    replicas,
    start_failover,
    until_healthy,
    weights,
)

pytestmark = [pytest.mark.slow, pytest.mark.devstack]

MOVED = {"us-west-1": 0, "us-east-1": 100}


def _unreachable(cfg: FleetConfig, directory: Path, **failover: Any) -> tuple[FleetConfig, Path, int]:
    """`cfg` with Temporal at a loopback port nothing listens on, written beside the session config."""
    port = free_port()
    dead = tuned(cfg, "temporal", address=f"127.0.0.1:{port}")
    if failover:
        dead = tuned(dead, "failover", **failover)
    return dead, write_config(dead, directory), port


def _printed_record(out: str) -> dict[str, Any]:
    body = out.split("--- break-glass audit record ---\n", 1)[1].split("--- end of record ---", 1)[0]
    rec: dict[str, Any] = json.loads(body)
    return rec


async def test_break_glass_moves_weights_records_and_is_imported_once_temporal_is_back(
    start_workers: StartWorkers, fleet_config_path: Path, temporal_client: Client
) -> None:
    cfg = await start_workers()
    dead, dead_path, port = _unreachable(cfg, fleet_config_path.parent)
    code, out, err = await cli(
        "failover", "--to", "us-east-1", "--break-glass", "--yes", "-c", str(dead_path)
    )
    assert code == 0, out + err
    assert weights(cfg) == MOVED
    uri_match = re.search(r"^audit record stored: (s3://(\S+?)/(\S+))$", out, re.M)
    assert uri_match, out
    uri, bucket, key = uri_match.groups()
    assert bucket == cfg.drills.history_bucket and key.startswith(f"breakglass/{cfg.name}/")
    assert f"once Temporal is back, run: drctl failover-import {uri} -c {dead_path}" in out
    stored = json.loads(aws.client(cfg, "s3").get_object(Bucket=bucket, Key=key)["Body"].read())
    assert stored == _printed_record(out)
    assert stored["who"] == identity(cfg) and stored["target"] == "us-east-1"
    assert stored["source"] == "us-west-1" and stored["status"] == "succeeded"
    assert stored["weights_before"] == cfg.weights and stored["weights_after"] == MOVED
    assert f"cannot reach Temporal at 127.0.0.1:{port}" in stored["temporal"]
    assert stored["probe"]["region"] == "us-east-1" and stored["probe"]["status"] == "HEALTHY"
    assert stored["plan"]["weights_after"] == MOVED
    # The Failover's steps: the target scaled to the plan (not waited for), then verified through
    # the global endpoint: every answer from us-east-1.
    plan = stored["plan"]
    if plan["target_replicas_planned"] > plan["target_replicas_before"]:
        assert stored["scaled_to"] == plan["target_replicas_planned"] == replicas(cfg, "us-east-1")
    else:
        assert stored["scaled_to"] is None
    v = stored["verify"]
    assert v["ok"] == v["total"] == cfg.failover.verify_requests and v["by_region"] == {"us-east-1": v["ok"]}
    assert "verified: " in out

    # Temporal is back (the live config): the import records it; the monitor adopts it.
    live = write_config(cfg, fleet_config_path.parent)
    monitor = await monitor_handle(temporal_client, cfg)
    code, out, err = await cli("failover-import", uri, "-c", str(live))
    assert code == 0, out + err
    assert "monitor told: yes" in out
    wid = f"imported/{stored['id']}"
    desc = await temporal_client.get_workflow_handle(wid).describe()
    assert desc.status == WorkflowExecutionStatus.COMPLETED
    attrs = desc.typed_search_attributes
    assert attrs.get(sa.OPERATION) == "failover" and attrs.get(sa.FLEET) == cfg.name
    assert attrs.get(sa.TARGET_REGION) == "us-east-1" and attrs.get(sa.INITIATOR) == stored["who"]
    assert attrs.get(sa.VERDICT) == "imported"
    code, out, err = await cli("ops", "list", "--all", "-c", str(live), "-o", "json")
    assert code == 0, out + err
    assert any(o["workflow_id"] == wid and o["operation"] == "failover" for o in json.loads(out)), out
    view = await monitor.query("decisions", result_type=DecisionsView)
    adopted = [d for d in view.entries if d.mode == "break-glass"]
    assert len(adopted) == 1 and adopted[0].weights_after == MOVED and uri in adopted[0].reasons[0]
    # The monitor adopted the move: it does not put the weights back.
    assert weights(cfg) == MOVED
    # A second import finds the first: one operation per record.
    code, out, err = await cli("failover-import", uri, "-c", str(live))
    assert code == 0 and "already imported" in out, out + err


async def test_break_glass_with_no_bucket_still_moves_says_so_loudly_and_imports_from_a_file(
    start_workers: StartWorkers, fleet_config_path: Path, tmp_path: Path
) -> None:
    cfg = await start_workers()
    _, dead_path, _ = _unreachable(cfg, fleet_config_path.parent, audit_bucket="drctl-no-such-bucket")
    code, out, err = await cli(
        "failover", "--to", "us-east-1", "--break-glass", "--yes", "-c", str(dead_path)
    )
    assert code == 0, out + err
    assert weights(cfg) == MOVED  # the failed write undid nothing
    assert "THE AUDIT RECORD WAS NOT STORED in s3://drctl-no-such-bucket" in out
    assert "Traffic was NOT moved back" in out and "audit record stored" not in out
    saved = tmp_path / "record.json"
    saved.write_text(json.dumps(_printed_record(out)))
    live = write_config(cfg, fleet_config_path.parent)
    code, out, err = await cli("failover-import", str(saved), "-c", str(live))
    assert code == 0, out + err
    assert "imported: break-glass failover us-west-1 → us-east-1" in out


async def test_break_glass_is_refused_while_temporal_answers(
    fleet_config: FleetConfig, fleet_config_path: Path, dev_stack: stack.StackInfo
) -> None:
    before = weights(fleet_config)
    code, out, err = await cli(
        "failover", "--to", "us-east-1", "--break-glass", "--yes", "-c", str(fleet_config_path)
    )
    assert code == 2, out + err
    assert f"Temporal at {fleet_config.temporal.address} answered" in err and "Nothing changed" in err
    assert "audit record" not in out
    assert weights(fleet_config) == before


async def test_break_glass_to_an_unknown_region_exits_2_and_changes_nothing(
    fleet_config: FleetConfig, fleet_config_path: Path, dev_stack: stack.StackInfo
) -> None:
    before = weights(fleet_config)
    _, dead_path, _ = _unreachable(fleet_config, fleet_config_path.parent)
    code, out, err = await cli(
        "failover", "--to", "eu-nowhere-9", "--break-glass", "--yes", "-c", str(dead_path)
    )
    assert code == 2, out + err
    assert "eu-nowhere-9" in err and "audit record" not in out
    assert weights(fleet_config) == before


async def test_failover_import_of_a_bad_record_names_it_and_exits_2(
    fleet_config_path: Path, tmp_path: Path
) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text('{"fleet": "test"}')
    code, out, err = await cli("failover-import", str(junk), "-c", str(fleet_config_path))
    assert code == 2 and f"{junk}: not a break-glass record" in err, out + err
    missing = tmp_path / "missing.json"
    code, out, err = await cli("failover-import", str(missing), "-c", str(fleet_config_path))
    assert code == 2 and f"{missing}: no such file" in err, out + err
    code, out, err = await cli("failover-import", "s3://only-a-bucket", "-c", str(fleet_config_path))
    assert code == 2 and "expected s3://<bucket>/<key>" in err, out + err


async def _tier_watch_has_its_baseline(mon: Any, at_least: int = 2) -> int:
    """The monitor's tier watch has returned (its baseline, or what it saw since) and watches again:
    `at_least` calls started. Their number."""

    async def calls() -> int:
        n = 0
        async for e in mon.fetch_history_events():
            if e.HasField("activity_task_scheduled_event_attributes"):
                n += e.activity_task_scheduled_event_attributes.activity_type.name == "watch_global_tier"
        assert n >= at_least, n
        return n

    n: int = await assert_eventually(calls, timeout_s=60, interval_s=0.5, what=f"tier watch call {at_least}")
    return n


async def _logged(mon: Any, mode: str, words: str) -> Any:
    async def found() -> Any:
        view = await mon.query("decisions", result_type=DecisionsView)
        hits = [
            d for d in view.entries if d.mode == mode and any(words in r for r in d.reasons + d.held_back)
        ]
        assert hits, [d.line() for d in view.entries]
        return hits[-1]

    return await assert_eventually(found, timeout_s=30, interval_s=0.5, what=f"{mode}: {words}")


async def test_the_monitor_notices_weights_it_did_not_set_and_regions_the_data_plane_took_out(
    start_workers: StartWorkers, fleet_config: FleetConfig, fleet_config_path: Path, temporal_client: Client
) -> None:
    """Issue 29 item 3 with the rebalance off: nothing but the tier watch reads the global tier."""
    cfg = await start_workers(cfg=tuned(fast_config(fleet_config), "failover", rebalance="off"))
    mon = await monitor_handle(temporal_client, cfg)
    await until_healthy(mon)
    await _tier_watch_has_its_baseline(mon)

    # A hand edit: recorded as set outside drctl, and kept as it is.
    edited = {"us-west-1": 30, "us-east-1": 70}
    global_traffic(cfg).set_weights(edited)
    d = await _logged(mon, "tier-watch", "set outside drctl (no drctl operation and no break-glass record)")
    assert d.weights_before == cfg.weights and d.weights_after == edited
    assert weights(cfg) == edited

    # The data plane takes us-west-1 out of rotation, then puts it back: both recorded.
    tier = cfg.traffic.global_tier
    assert isinstance(tier, HAProxyGlobal)
    rt = HAProxyRuntime(tier.runtime_socket)
    rt.command(f"set server {tier.backend}/us-west-1 state maint")
    try:
        d = await _logged(
            mon, "tier-watch", "us-west-1 taken out of rotation by the data plane: in maintenance"
        )
        assert d.held_back and d.held_back[0].startswith("us-west-1 out: in maintenance")
    finally:
        rt.command(f"set server {tier.backend}/us-west-1 state ready")
    await _logged(mon, "tier-watch", "us-west-1 back in rotation")

    # A break-glass failover with no import: the tier watch finds its audit record and adopts the
    # move: recorded with the record, never undone (the monitor fails back only its own failovers).
    _, dead_path, _ = _unreachable(cfg, fleet_config_path.parent)
    code, out, err = await cli(
        "failover", "--to", "us-east-1", "--break-glass", "--yes", "-c", str(dead_path)
    )
    assert code == 0, out + err
    uri_match = re.search(r"^audit record stored: (s3://\S+)$", out, re.M)
    assert uri_match, out
    uri = uri_match.group(1)
    d = await _logged(mon, "break-glass", f"audit record {uri}")
    assert d.action == "failover" and d.weights_before == edited and d.weights_after == MOVED
    assert any("break-glass failover us-west-1 → us-east-1 (succeeded)" in r for r in d.reasons), d.reasons
    stored = _printed_record(out)
    wid = f"imported/{stored['id']}"
    assert any(f"imported as {wid}" in r for r in d.reasons), d.reasons
    # The watch imported the record itself: a completed, imported operation, as failover-import makes.
    desc = await temporal_client.get_workflow_handle(wid).describe()
    assert desc.typed_search_attributes.get(sa.VERDICT) == "imported"
    code, listed, err = await cli("ops", "list", "--all", "-c", str(fleet_config_path), "-o", "json")
    assert code == 0 and any(o["workflow_id"] == wid for o in json.loads(listed)), listed + err
    st = await mon.query("status", result_type=MonitorStatus)
    assert st.failed_over == [] and st.active_failover is None
    await asyncio.sleep(3 * cfg.health.interval_s)
    assert weights(cfg) == MOVED


async def test_share_given_back_outside_drctl_to_a_drained_region_is_put_back_by_an_automatic_monitor(
    start_workers: StartWorkers, fleet_config: FleetConfig, temporal_client: Client
) -> None:
    """Issue 26 item 5 with issue 29's rule, the monitor automatic. A hand drain (share only taken
    away) is adopted. Then an operator fails over to us-east-1, and the global tier comes back with its
    config weights (as a restart without its state file would), giving us-west-1 share again: the
    monitor puts the failover's weights back, through a Rebalance child (action reconcile) holding the
    fleet lock, for a drained region returns only through failback."""
    cfg = await start_workers(cfg=tuned(fast_config(fleet_config), "failover", rebalance="automatic"))
    mon = await monitor_handle(temporal_client, cfg)
    await until_healthy(mon)
    calls = await _tier_watch_has_its_baseline(mon)
    by_hand = {"us-west-1": 80, "us-east-1": 20}
    global_traffic(cfg).set_weights(by_hand)
    d = await _logged(mon, "tier-watch", "they only take share away")
    assert d.action == "hold" and d.weights_after == by_hand
    calls = await _tier_watch_has_its_baseline(mon, calls + 1)

    res = await asyncio.wait_for((await start_failover(temporal_client, cfg)).result(), 90)
    assert res.status == "succeeded" and weights(cfg) == MOVED, res.error
    # The failover's move is drctl's: the watch takes it as its baseline, silently, and reads on; an
    # operation closed before the watch's last read cannot have made a change seen after it.
    await _tier_watch_has_its_baseline(mon, calls + 1)
    await asyncio.sleep(2 * cfg.health.interval_s)
    global_traffic(cfg).set_weights(cfg.weights)  # the config's weights, as a restarted tier loads them
    d = await _logged(mon, "tier-watch", "which drctl had drained: put back to the weights drctl last saw")
    assert d.action == "reconcile" and d.outcome == "applied", d.line()
    assert d.weights_before == cfg.weights and d.weights_after == MOVED
    assert weights(cfg) == MOVED
    desc = await temporal_client.get_workflow_handle(f"rebalance/{cfg.name}").describe()
    assert desc.status == WorkflowExecutionStatus.COMPLETED
