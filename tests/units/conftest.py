"""Fast unit tests of the pure modules (models, the drill boundary, the error table).

`make mutate` runs these (and a few other fast files) against every mutant, so they start no
server and no subprocess: a subprocess would import the unmutated tree and could never fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from drctl.config.schema import FleetConfig
from tests.support.config import write_drill_config


@pytest.fixture(scope="session")
def unit_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("units")


@pytest.fixture(scope="session")
def cfg(unit_dir: Path) -> FleetConfig:
    """Two regions, both allowed drill targets, the dev-stack injector."""
    return write_drill_config(unit_dir)
