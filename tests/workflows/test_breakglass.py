"""`drctl failover --break-glass` with Temporal gone, then `drctl failover-import` once it is back.

Temporal is made unreachable by pointing a copy of the fleet config at a closed loopback port; the
global tier (the dev stack's HAProxy), the target's cluster and moto's S3 stay real.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from drctl.client.identity import identity
from drctl.config.schema import FleetConfig
from drctl.devstack import stack
from drctl.models import search_attributes as sa
from drctl.models.monitor_decisions import DecisionsView
from drctl.providers import aws
from tests.support.cli import cli
from tests.support.config import tuned, write_config
from tests.support.ports import free_port
from tests.support.workers import StartWorkers, monitor_handle, weights

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
