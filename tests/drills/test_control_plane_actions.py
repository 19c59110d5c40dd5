"""The control-plane fault actions refuse, before touching anything, where they cannot run.

A drill workflow (the worker writes `drill_id` into the configuration) would stop the Temporal it
runs on; the Kubernetes injector has no such fault; a region outside the allow-list is refused as
by every action. Nothing here needs a stack: each refusal comes before the admin API is called.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from drctl.chaos import TargetNotAllowed
from drctl.chaos.actions import FaultNotInjected, stop_temporal, stop_worker
from tests.support.config import write_fleet_config


@pytest.fixture
def config_path() -> Iterator[Path]:
    path = write_fleet_config()
    yield path
    shutil.rmtree(path.parent, ignore_errors=True)


@pytest.mark.parametrize("action", [stop_temporal, stop_worker])
def test_a_drill_run_by_temporal_may_not_stop_its_own_control_plane(
    action: Callable[..., Any], config_path: Path
) -> None:
    conf = {"fleet_config": str(config_path), "drill_id": "drill/test/20261202T000000"}
    with pytest.raises(
        FaultNotInjected, match="cannot stop its own control plane; run this experiment with `chaos run`"
    ):
        action("us-west-1", configuration=conf)


def test_the_kubernetes_injector_has_no_control_plane_fault() -> None:
    path = write_fleet_config(overrides={"drills": {"fault_injector": "kubernetes"}})
    try:
        with pytest.raises(FaultNotInjected, match="needs the devstack injector"):
            stop_temporal("us-west-1", configuration={"fleet_config": str(path)})
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)


def test_a_region_outside_the_allow_list_is_refused() -> None:
    path = write_fleet_config(overrides={"drills": {"allowed_targets": ["us-east-1"]}})
    try:
        with pytest.raises(TargetNotAllowed, match="'us-west-1' is not an allowed drill target"):
            stop_worker("us-west-1", configuration={"fleet_config": str(path)})
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)
