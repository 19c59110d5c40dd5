"""`drctl status`'s verdict: which facts make it exit 1 or 3, each named in one line."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from drctl.cli.status import exit_code, problems
from drctl.config.schema import FleetConfig
from tests.support.config import fleet_config_data

CFG = FleetConfig.model_validate(fleet_config_data())
RPO = CFG.objectives.rpo_target_s


def _region(weight: int) -> dict[str, Any]:
    return {
        "configured_weight": weight,
        "weight": weight,
        "state": "HEALTHY",
        "replicas": {"replicas": 2, "ready": 2},
        "probe": {"status": "HEALTHY", "reason": ""},
    }


GOOD: dict[str, Any] = {
    "regions": {"us-west-1": _region(60), "us-east-1": _region(40)},
    "replication": [{"bucket": "models", "replica_region": "us-east-1", "lag_s": 0.5, "error": None}],
    "monitor": {"running": True, "alert": None},
    "operations": [],
}


def _with(change: Any) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    change(data)
    return data


def test_a_fleet_as_configured_has_no_problems_and_exits_0() -> None:
    assert problems(CFG, GOOD) == []
    assert exit_code({**GOOD, "problems": []}) == 0


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d["regions"]["us-east-1"].update(state="SUSPECT"), "us-east-1 is SUSPECT"),
        # No monitor state: the probe's verdict counts.
        (
            lambda d: d["regions"]["us-west-1"].update(
                state=None, probe={"status": "DOWN", "reason": "refused"}
            ),
            "us-west-1 is DOWN: refused",
        ),
        (
            lambda d: d["regions"]["us-east-1"].update(replicas={"error": "no worker polling q-east"}),
            "us-east-1 replicas unknown: no worker polling q-east",
        ),
        (
            lambda d: d["regions"]["us-west-1"].update(weight=0),
            "differ from the config's us-west-1 60 / us-east-1 40",
        ),
        (lambda d: d.update(weights_error="HAProxyError: no socket"), "global weights unknown: HAProxyError"),
        (lambda d: d["replication"][0].update(lag_s=RPO + 1), "over the RPO target"),
        (
            lambda d: d["replication"][0].update(lag_s=None, error="rclone: 403"),
            "models/us-east-1 unknown: rclone: 403",
        ),
        (lambda d: d["monitor"].update(alert="no quorum"), "monitor alert: no quorum"),
        (
            lambda d: d["operations"].append({"workflow_id": "failover/test", "phase": "compensate"}),
            "failover/test is failing (phase compensate)",
        ),
    ],
)
def test_each_fact_out_of_place_is_named_and_exits_1(change: Any, words: str) -> None:
    data = _with(change)
    found = problems(CFG, data)
    assert len(found) == 1 and words in found[0], found
    assert exit_code({**data, "problems": found}) == 1


def test_nothing_read_by_the_workers_is_one_reason_and_exits_3() -> None:
    data = {**GOOD, "read_error": "no worker polling drctl", "weights_error": "no worker polling drctl"}
    found = problems(CFG, data)
    assert found == ["the workers did not read the fleet: no worker polling drctl"]
    assert exit_code({**data, "problems": found}) == 3
