"""`drctl failover --from`, `drctl failback [--region]`, `drctl ops show`, the approval timeout and
`drctl drill run --no-wait` followed by `drctl ops watch`, run in-process (tests.support.cli) against
the dev stack and judged by weights, replicas and the operation's result."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import cli
from tests.support.config import write_config
from tests.support.drills import EXPERIMENTS
from tests.support.wait import assert_eventually
from tests.support.workers import StartWorkers, admin, replicas, weights

pytestmark = [pytest.mark.slow, pytest.mark.devstack]


async def show(wid: str, path: str) -> dict[str, Any]:
    code, out, err = await cli("ops", "show", wid, "-o", "json", "-c", path)
    assert code == 0, err
    return json.loads(out)


async def test_failover_from_then_failback_region_and_ops_show_each(
    start_workers: StartWorkers, fleet_config_path: Path
) -> None:
    cfg = await start_workers()
    path = str(write_config(cfg, fleet_config_path.parent))
    code, out, err = await cli("failover", "--to", "us-east-1", "--from", "us-east-1", "--yes", "-c", path)
    assert code == 2 and "--from and --to are both us-east-1" in err, (out, err)

    code, out, err = await cli(
        "failover", "--to", "us-east-1", "--from", "us-west-1", "--yes", "-o", "json", "-c", path
    )
    assert code == 0, (out, err)
    res = json.loads(out)["result"]
    assert (res["status"], res["source"], res["target"]) == ("succeeded", "us-west-1", "us-east-1"), res
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
    assert replicas(cfg, "us-east-1") == 4  # its own 2, plus the 2 that served us-west-1's share
    shown = await show(f"failover/{cfg.name}", path)
    assert shown["status"] == "COMPLETED" and shown["operation"] == "failover"
    assert shown["result"]["source"] == "us-west-1" and shown["result"]["weights_after"] == weights(cfg)
    assert "shift" in [p["phase"] for p in shown["progress"]["phases"]]
    code, out, _ = await cli("ops", "show", f"failover/{cfg.name}", "-c", path)
    assert code == 0 and "UI: " in out and "verify" in out

    code, out, err = await cli("failback", "--region", "eu-west-9", "--yes", "-c", path)
    assert code == 2 and "eu-west-9" in err and weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
    code, out, err = await cli("failback", "--region", "us-west-1", "--yes", "-o", "json", "-c", path)
    assert code == 0, (out, err)
    back = json.loads(out)["result"]
    assert back["status"] == "succeeded" and back["steps_done"] == back["steps_planned"] == 2, back
    assert weights(cfg) == cfg.weights
    assert back["scaled_back"] == {"us-east-1": 2}, back
    await assert_eventually(
        lambda: asyncio.to_thread(lambda: replicas(cfg, "us-east-1") == 2),
        timeout_s=30,
        what="us-east-1 scaled back to its configured 2",
    )
    shown = await show(f"failback/{cfg.name}", path)
    assert shown["status"] == "COMPLETED" and shown["result"]["weights_after"] == cfg.weights
    # Nothing to fail back from: exit 0 (not needed counts as success), nothing moves.
    code, out, err = await cli("failback", "--yes", "-o", "json", "-c", path)
    assert code == 0 and json.loads(out)["result"]["status"] == "not_needed", (out, err)
    assert weights(cfg) == cfg.weights


async def test_failover_without_approval_in_time_ends_aborted_and_moves_nothing(
    start_workers: StartWorkers, fleet_config_path: Path
) -> None:
    cfg = await start_workers()
    gated = cfg.model_copy(
        update={
            "failover": cfg.failover.model_copy(update={"require_approval": True, "approval_timeout_s": 2.0})
        }
    )
    path = str(write_config(gated, fleet_config_path.parent))
    code, out, err = await cli("failover", "--to", "us-east-1", "--yes", "-o", "json", "-c", path)
    assert code == 1, (out, err)
    res = json.loads(out)["result"]
    assert res["status"] == "aborted" and res["error"] == "no approval within 2 s", res
    assert res["approved_by"] is None
    assert weights(cfg) == cfg.weights and replicas(cfg, "us-east-1") == 2
    shown = await show(f"failover/{cfg.name}", path)
    assert shown["status"] == "FAILED" and shown["result"]["status"] == "aborted"
    assert "awaiting-approval" in [p["phase"] for p in shown["progress"]["phases"]]


async def test_drill_run_no_wait_returns_at_once_and_ops_show_follows_the_drill(
    start_workers: StartWorkers, fleet_config_path: Path
) -> None:
    cfg = await start_workers()
    path = str(write_config(cfg, fleet_config_path.parent))
    # An unhealthy fleet: the drill aborts in its preflight, injecting nothing. Waiting for it would
    # exit 1; --no-wait exits 0 as soon as it started, and names the workflow.
    admin(cfg, "us-east-1", "/faults/inference", {"error_rate": 1.0})
    before = [r["state"] for r in admin(cfg, "us-west-1", "/replicas")]
    code, out, err = await cli(
        "drill", "run", str(EXPERIMENTS / "region-outage.json"), "--no-wait", "--yes", "-c", path
    )
    assert code == 0, (out, err)
    wid = next(t for t in err.split() if t.startswith(f"drill/{cfg.name}/"))
    # Re-attached with `ops watch`: it follows the drill to its end and exits with the drill's own
    # code (1: not PASS), printing what `drill run` would have printed (the report itself).
    code, out, err = await asyncio.wait_for(cli("ops", "watch", wid, "-o", "json", "-c", path), 120)
    assert code == 1, (out, err)
    report = json.loads(out)
    assert report["id"] == wid and report["verdict"] == "ABORTED" and not report["fault_injected"], report
    shown = await show(wid, path)
    assert shown["status"] == "FAILED" and shown["operation"] == "drill", shown
    assert shown["result"] == report
    assert any("us-east-1 is" in r for r in report["reasons"]), report["reasons"]
    assert [r["state"] for r in admin(cfg, "us-west-1", "/replicas")] == before
    assert weights(cfg) == cfg.weights
