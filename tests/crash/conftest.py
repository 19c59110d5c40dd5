"""Crash-suite fixtures: one set of real per-region worker processes for the module, on fresh queues."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client

from drctl.config.schema import FleetConfig
from drctl.devstack import stack
from tests.crash.endstate import reset_release
from tests.crash.harness import RegionWorkers
from tests.support.config import port_pair, tuned, write_config
from tests.support.devstack import restore_baseline
from tests.support.workers import fast_config
from tests.support.workers import terminate_fleet_workflows as _terminate_fleet_workflows


@pytest.fixture(scope="module")
def crash_config(
    fleet_config: FleetConfig, fleet_config_path: Path, dev_stack: stack.StackInfo
) -> tuple[FleetConfig, Path]:
    """The test fleet with short probe and failback settings and this module's own task queues."""
    cfg = fast_config(fleet_config)
    # The workers' HTTP ports are chosen now, not at session start: on a shared machine a port
    # free then may have been taken since (another stack's replica) by the time this module runs.
    assert cfg.devstack is not None
    cfg = tuned(cfg, "devstack", worker_http_port=port_pair())
    return cfg, write_config(cfg, fleet_config_path.parent)


@pytest.fixture(scope="module")
def region_workers(crash_config: tuple[FleetConfig, Path]) -> Iterator[RegionWorkers]:
    workers = RegionWorkers(*crash_config)
    yield workers
    workers.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def crash_fleet(
    temporal_client: Client, crash_config: tuple[FleetConfig, Path], region_workers: RegionWorkers
) -> AsyncIterator[FleetConfig]:
    """Live workers for every region before the test; after it, nothing running and the baseline back."""
    await region_workers.ensure()
    yield crash_config[0]
    await _terminate_fleet_workflows(temporal_client, crash_config[0])
    reset_release(crash_config[0])
    restore_baseline(crash_config[0])
