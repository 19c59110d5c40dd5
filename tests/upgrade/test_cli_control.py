"""The upgrade, migrate and restore command lines docs/operations.md shows, run in-process on the dev stack.

`drctl upgrade --strategy`, `upgrade pause|resume|status|promote|abort`, `migrate --from --to
--decommission` and `restore --existing-resource-policy`: each checked by what it did to the fleet
(track weights, images, replicas, Velero's restored objects), not by its exit code alone.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.models.upgrade import Outcome, UpgradeResult
from tests.support.cli import cli
from tests.support.config import write_config
from tests.support.devstack import apps_api
from tests.support.upgrade import (
    deployments,
    fresh_queues,
    running_worker,
    stable_container,
    track_weight_is,
    track_weights,
)
from tests.support.wait import assert_eventually
from tests.support.workers import weights

pytestmark = pytest.mark.devstack


@pytest.fixture
async def cli_env(
    fleet_config: FleetConfig, fleet_config_path: Path, temporal_client: Client, reset_fleet: None
) -> AsyncIterator[tuple[FleetConfig, str]]:
    """A worker on fresh queues and its config file; short analysis windows keep each step ~1 s."""
    cfg = fresh_queues(fleet_config)
    cfg = cfg.model_copy(
        update={
            "upgrade": cfg.upgrade.model_copy(
                update={
                    "steps_percent": [50, 100],
                    "step_pause_s": 1.0,
                    "scale_down_delay_s": 30.0,
                    "min_samples": 8,
                }
            )
        }
    )
    async with running_worker(temporal_client, cfg):
        yield cfg, str(write_config(cfg, fleet_config_path.parent))


def _started(code: int, out: str, err: str) -> str:
    assert code == 0, (out, err)
    return json.loads(out)["workflow_id"]


async def _upgrade_no_wait(path: str, image: str, strategy: str, region: str) -> str:
    """`drctl upgrade --no-wait -o json` of one region, in-process: the upgrade's workflow id."""
    return _started(
        *await cli(
            "upgrade",
            "--image",
            image,
            "--strategy",
            strategy,
            "--regions",
            region,
            "--no-wait",
            "--yes",
            "-o",
            "json",
            "-c",
            path,
        )
    )


async def _status(wid: str, path: str) -> dict[str, Any]:
    code, out, err = await cli("upgrade", "status", wid.rsplit("/", 1)[1], "-o", "json", "-c", path)
    assert code == 0, err
    return json.loads(out)


async def test_canary_paused_resumed_and_promoted_from_the_cli(
    cli_env: tuple[FleetConfig, str], temporal_client: Client
) -> None:
    cfg, path = cli_env
    old = stable_container(cfg, "us-west-1").image
    image = f"vllm/vllm-openai:v3.0.{uuid.uuid4().int % 1000}"
    wid = await _upgrade_no_wait(path, image, "canary", "us-west-1")
    uid = wid.rsplit("/", 1)[1]
    code, out, err = await cli("upgrade", "pause", uid, "--reason", "hold for the test", "-c", path)
    assert code == 0 and "holds at the next step boundary" in out, (out, err)

    async def held() -> bool:
        st = await _status(wid, path)
        return (
            st["paused"] and st["pause_reason"] == "hold for the test" and "canary" in _deployments_now(cfg)
        )

    await assert_eventually(
        held, timeout_s=90, interval_s=0.3, what="the canary deployed and the upgrade held"
    )
    # Held at the step boundary: no share of traffic reaches the canary while paused.
    await asyncio.sleep(1.5)
    assert track_weights(cfg, "us-west-1").get("canary", 0) == 0
    code, out, err = await cli("upgrade", "status", uid, "-c", path)
    assert code == 0 and "PAUSED" in out and "hold for the test" in out, out
    code, out, err = await cli("upgrade", "resume", uid, "-c", path)
    assert code == 0 and "resumed" in out, (out, err)
    await assert_eventually(
        lambda: asyncio.to_thread(track_weight_is, cfg, "us-west-1", "canary", 50),
        timeout_s=60,
        interval_s=0.1,
        what="the 50 % step after resume",
    )
    code, out, err = await cli("upgrade", "promote", uid, "--yes", "-c", path)
    # The update records the operator's identity (DRCTL_IDENTITY, else user@host), not "cli".
    assert code == 0 and "promoting us-west-1 now (by " in out and "(by cli)" not in out, (out, err)
    res = await asyncio.wait_for(result_of(temporal_client.get_workflow_handle(wid), UpgradeResult), 120)
    assert res.outcome is Outcome.SUCCEEDED, res
    assert stable_container(cfg, "us-west-1").image == image != old
    after = track_weights(cfg, "us-west-1")
    assert after.get("stable") == 100 and after.get("canary", 0) == 0, after
    assert "llm-canary" not in deployments(cfg, "us-west-1")
    # A finished upgrade refuses further control, naming why (exit 1, no traceback).
    code, out, err = await cli("upgrade", "pause", uid, "-c", path)
    assert code == 1 and "cannot pause" in err and "already completed" in err and "Traceback" not in err, (
        out,
        err,
    )


def _deployments_now(cfg: FleetConfig) -> str:
    return " ".join(deployments(cfg, "us-west-1"))


async def test_blue_green_aborted_from_the_cli_keeps_blue(
    cli_env: tuple[FleetConfig, str], temporal_client: Client
) -> None:
    cfg, path = cli_env
    before = stable_container(cfg, "us-east-1").image
    wid = await _upgrade_no_wait(path, "vllm/vllm-openai:v9.9.9", "blue-green", "us-east-1")
    uid = wid.rsplit("/", 1)[1]
    # Green carries everything during the 30 s scale-down delay; blue (stable) still runs to flip back to.
    await assert_eventually(
        lambda: asyncio.to_thread(track_weight_is, cfg, "us-east-1", "green", 100),
        timeout_s=120,
        interval_s=0.1,
        what="the switch to green",
    )
    code, out, err = await cli(
        "upgrade", "abort", uid, "--reason", "operator saw a problem", "--yes", "-c", path
    )
    assert code == 0 and "abort requested" in out, (out, err)
    res = await asyncio.wait_for(result_of(temporal_client.get_workflow_handle(wid), UpgradeResult), 120)
    assert res.outcome is Outcome.ABORTED, res
    assert "operator saw a problem" in res.reason
    assert (
        track_weights(cfg, "us-east-1").get("stable") == 100
        and track_weights(cfg, "us-east-1").get("green") == 0
    )
    assert stable_container(cfg, "us-east-1").image == before
    assert "llm-green" not in deployments(cfg, "us-east-1")


async def test_migrate_with_decommission_moves_traffic_and_scales_the_source_to_zero(
    cli_env: tuple[FleetConfig, str],
) -> None:
    cfg, path = cli_env
    code, out, err = await cli(
        "migrate",
        "--from",
        "us-west-1",
        "--to",
        "us-east-1",
        "--steps",
        "50,100",
        "--decommission",
        "--yes",
        "-o",
        "json",
        "-c",
        path,
    )
    assert code == 0, (out, err)
    res = json.loads(out)["result"]
    assert res["outcome"] == "SUCCEEDED", res
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
    west = cfg.region("us-west-1")
    src = apps_api(west.kube.api_url or "").read_namespaced_deployment("llm-stable", west.kube.namespace)
    assert src.spec.replicas == 0, src.spec


async def test_restore_existing_resource_policy_none_keeps_update_overwrites(
    cli_env: tuple[FleetConfig, str],
) -> None:
    cfg, path = cli_env
    west = cfg.region("us-west-1")
    apps = apps_api(west.kube.api_url or "")
    name = f"policy-{uuid.uuid4().hex[:6]}"
    code, out, err = await cli(
        "backup", "create", "--name", name, "--region", "us-west-1", "-o", "json", "-c", path
    )
    assert code == 0 and json.loads(out)["phase"] == "Completed", (out, err)
    marker = {"metadata": {"annotations": {"drctl.test/after-backup": name}}}
    apps.patch_namespaced_deployment("llm-stable", west.kube.namespace, marker)

    def annotations() -> dict[str, str]:
        return apps.read_namespaced_deployment("llm-stable", west.kube.namespace).metadata.annotations or {}

    # Velero's default, none, keeps existing objects; update overwrites them with the backed-up ones.
    for policy, kept in (("none", name), ("update", None)):
        code, out, err = await cli(
            "restore",
            "--backup",
            name,
            "--region",
            "us-west-1",
            "--existing-resource-policy",
            policy,
            "--yes",  # update overwrites objects: asked first
            "-o",
            "json",
            "-c",
            path,
        )
        assert code == 0 and json.loads(out)["phase"] == "Completed", (policy, out, err)
        assert annotations().get("drctl.test/after-backup") == kept, policy
    code, out, err = await cli("restore", "--backup", name, "--existing-resource-policy", "merge", "-c", path)
    assert code == 2 and "bad --existing-resource-policy 'merge'" in err, (out, err)
