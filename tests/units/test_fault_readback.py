"""What a region still holds after a drill's clear, read back through the admin API that injects the
faults (drctl/chaos/faults.still_injected), one line per fault, over real HTTP to a stand-in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.chaos import faults
from drctl.config.schema import FleetConfig, load_config
from tests.support.config import fleet_config_data
from tests.support.standin import Reply, StandIn, serve

WEST = "us-west-1"


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    yield from serve()


@pytest.fixture
def cfg(standin: StandIn, tmp_path: Path) -> FleetConfig:
    standin.reset()
    data: dict[str, Any] = fleet_config_data()
    for r in data["regions"]:
        r["devstack_admin_url"] = f"{standin.url}/admin/{r['name']}"
    data["drills"] = {"allowed_targets": [WEST], "fault_injector": "devstack"}
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_config(path)


def _held(standin: StandIn, cfg: FleetConfig, body: Any) -> list[str]:
    standin.replies[f"GET /admin/{WEST}/faults"] = Reply(200, body)
    return faults.still_injected(cfg, WEST)


def test_a_clear_region_reads_back_empty(standin: StandIn, cfg: FleetConfig) -> None:
    clear = {"replicas": [], "gateway": None, "inference": {}, "partitioned": [], "owners": []}
    assert _held(standin, cfg, clear) == []
    assert standin.calls[-1][:2] == ("GET", f"/admin/{WEST}/faults")
    assert (
        _held(standin, cfg, {}) == [] and _held(standin, cfg, None) == [] and _held(standin, cfg, [1]) == []
    )
    # Owners alone are not a fault: the marker goes with the clear, but holds nothing.
    assert _held(standin, cfg, {"owners": ["drill/x"]}) == []


def test_every_kind_of_fault_is_named(standin: StandIn, cfg: FleetConfig) -> None:
    body = {
        "replicas": [
            {"pod": "w-0", "state": "killed", "stay_down": True},
            {"pod": "w-1", "state": "frozen", "stay_down": False},
            "junk",
        ],
        "gateway": "killed",
        "inference": {"stable": {"error_rate": 0.5}, "*": {"added_latency_ms": 100}},
        "partitioned": ["10.0.0.1"],
    }
    assert _held(standin, cfg, body) == [
        "replica w-0 (killed, kept down)",
        "replica w-1 (frozen)",
        "gateway killed",
        "inference fault on *",
        "inference fault on stable",
        "partition from 10.0.0.1",
    ]
