"""Fast unit tests of the pure modules (models, the drill boundary, the error table).

`make mutate` runs these (and a few other fast files) against every mutant, so they start no
server and no subprocess: a subprocess would import the unmutated tree and could never fail.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.config.schema import FleetConfig, load_config
from tests.fleetcfg import fleet_config_data

REPO = Path(__file__).resolve().parents[2]


def experiment(name: str = "region-outage") -> dict[str, Any]:
    """A fresh copy of a shipped experiment, to break one thing in."""
    return copy.deepcopy(json.loads((REPO / "experiments" / f"{name}.json").read_text()))


def write_config(
    directory: Path, *, allowed: list[str] | None = None, injector: str = "devstack", name: str = "fleet.yaml"
) -> FleetConfig:
    data = fleet_config_data()
    data["drills"] = {
        "allowed_targets": ["us-west-1", "us-east-1"] if allowed is None else allowed,
        "fault_injector": injector,
    }
    path = directory / name
    path.write_text(yaml.safe_dump(data))
    return load_config(path)


@pytest.fixture(scope="session")
def unit_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("units")


@pytest.fixture(scope="session")
def cfg(unit_dir: Path) -> FleetConfig:
    """Two regions, both allowed drill targets, the dev-stack injector."""
    return write_config(unit_dir)
