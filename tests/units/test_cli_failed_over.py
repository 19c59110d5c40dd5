"""`drctl status` after a failover: a state (exit 0, with the way back), not a drift (exit 1)."""

from __future__ import annotations

import copy
from typing import Any

from drctl.cli.failed_over import failed_over
from drctl.cli.status import exit_code, problems, renderables, state
from drctl.config.schema import FleetConfig
from tests.support.config import fleet_config_data

CFG = FleetConfig.model_validate(fleet_config_data())
BACK = "drctl failback -c fleet.yaml"


def _last(**over: Any) -> dict[str, Any]:
    return {
        "operation": "failover",
        "status": "COMPLETED",
        "workflow_id": "failover/dev",
        "source": None,
        "target": "us-east-1",
        "initiator": "alice@laptop",
        "close_time": "2026-12-02 12:00:00+00:00",
    } | over


def _region(configured: int, weight: int) -> dict[str, Any]:
    return {
        "configured_weight": configured,
        "weight": weight,
        "state": "HEALTHY",
        "replicas": {"replicas": 2, "ready": 2},
        "probe": {"status": "HEALTHY", "reason": ""},
    }


def test_a_completed_failover_whose_weights_hold_is_failed_over() -> None:
    held = failed_over({"us-west-1": 0, "us-east-1": 100}, _last(), BACK)
    assert held is not None
    assert (held["target"], held["by"], held["fail_back"]) == ("us-east-1", "alice@laptop", BACK)
    # --from drained one region only: the others may keep theirs.
    assert failed_over({"us-west-1": 0, "us-east-1": 100}, _last(source="us-west-1"), BACK)


def test_anything_else_is_still_a_drift() -> None:
    moved = {"us-west-1": 0, "us-east-1": 100}
    assert failed_over(moved, None, BACK) is None  # no failover on record
    assert failed_over(moved, _last(status="FAILED"), BACK) is None
    assert failed_over(moved, _last(operation="failback"), BACK) is None
    # Weights moved since: by hand, or half a failback.
    assert failed_over({"us-west-1": 20, "us-east-1": 80}, _last(), BACK) is None
    assert failed_over({"us-west-1": 100, "us-east-1": 0}, _last(), BACK) is None
    assert failed_over(moved, _last(target="eu-1"), BACK) is None


def test_status_exits_0_and_says_how_to_fail_back() -> None:
    data: dict[str, Any] = {
        "regions": {"us-west-1": _region(60, 0), "us-east-1": _region(40, 100)},
        "replication": [],
        "monitor": {"running": True, "alert": None},
        "operations": [],
    }
    drift = copy.deepcopy(data)
    assert [p for p in problems(CFG, drift) if "differ from the config" in p]
    data["failed_over"] = failed_over({"us-west-1": 0, "us-east-1": 100}, _last(), BACK)
    data["problems"] = problems(CFG, data)
    assert data["problems"] == [] and exit_code(data) == 0 and state(data) == "failed-over"
    text = "\n".join(str(r) for r in renderables(CFG, data) if not hasattr(r, "columns"))
    assert "FAILED OVER on purpose: all traffic on us-east-1" in text and BACK in text
    # A failed-over fleet with a real problem is still not OK.
    data["regions"]["us-east-1"]["state"] = "SUSPECT"
    data["problems"] = problems(CFG, data)
    assert exit_code(data) == 1 and state(data) == "not-ok"
