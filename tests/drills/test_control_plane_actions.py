"""The control-plane fault actions refuse, before touching anything, where they cannot run.

A drill workflow (the worker writes `drill_id` into the configuration) would stop the Temporal it
runs on; the Kubernetes injector has no such fault; a region outside the allow-list is refused as
by every action. Each refusal comes before the admin API is called. Where they run, they call the
region admin API (a stand-in here, over real HTTP) and read the stopped components back from it.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drctl.chaos import TargetNotAllowed
from drctl.chaos.actions import FaultNotInjected, stop_temporal, stop_worker
from drctl.chaos.faults import still_injected
from drctl.config.schema import load_config
from tests.support.config import fleet_config_data, write_fleet_config
from tests.support.standin import Reply, StandIn, serve


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


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    yield from serve()


@pytest.fixture
def admin_config(standin: StandIn, tmp_path: Path) -> Path:
    """A devstack fleet whose region admin APIs are a stand-in (real HTTP)."""
    standin.reset()
    data: dict[str, Any] = fleet_config_data()
    for r in data["regions"]:
        r["devstack_admin_url"] = f"{standin.url}/admin/{r['name']}"
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_stop_goes_to_the_region_admin_api_and_reads_back_until_cleared(
    standin: StandIn, admin_config: Path
) -> None:
    conf = {"fleet_config": str(admin_config)}
    standin.replies["POST /admin/us-west-1/faults/control-plane"] = Reply(
        200, {"affected": ["temporal (pid 7)"]}
    )
    out = stop_temporal("us-west-1", configuration=conf)
    assert out["injected"] is True and out["affected"] == ["temporal (pid 7)"], out
    method, path, body, _ = standin.calls[-1]
    assert (method, path, body) == (
        "POST",
        "/admin/us-west-1/faults/control-plane",
        {"action": "stop", "component": "temporal", "owner": None},
    )
    standin.replies["GET /admin/us-west-1/faults"] = Reply(200, {"control_plane": ["temporal", "worker"]})
    cfg = load_config(admin_config)
    assert still_injected(cfg, "us-west-1") == [
        "control plane: temporal stopped",
        "control plane: worker stopped",
    ]


def test_a_worker_that_was_not_running_is_not_a_fault(standin: StandIn, admin_config: Path) -> None:
    standin.replies["POST /admin/us-west-1/faults/control-plane"] = Reply(200, {"affected": []})
    with pytest.raises(FaultNotInjected, match="stop-worker in us-west-1: nothing matched"):
        stop_worker("us-west-1", configuration={"fleet_config": str(admin_config)})
