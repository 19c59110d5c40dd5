"""`drctl upgrade`, `drctl migrate`, `drctl backup` and `drctl restore` as a user runs them."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from pathlib import Path

import pytest
from rich.console import Console
from temporalio.client import Client

from drctl.cli.upgrade import render
from drctl.config.schema import FleetConfig
from drctl.models import search_attributes as sa
from drctl.models.upgrade import Outcome, RegionRelease, Strategy, UpgradeResult
from tests.support import cli
from tests.support.config import tuned, write_config
from tests.support.upgrade import fresh_queues, running_worker


def drctl(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    return cli.drctl(*args, "--config", str(config))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["upgrade", "--image", "Not An Image"], "bad image reference"),
        (["upgrade", "--image", "vllm/vllm-openai"], "tag or @sha256 digest"),
        (["upgrade", "--image", "vllm/vllm-openai:v1", "--steps", "50,25,100"], "bad --steps"),
        (["upgrade", "--image", "vllm/vllm-openai:v1", "--steps", "5,25"], "end at 100"),
        (
            ["upgrade", "--image", "vllm/vllm-openai:v1", "--regions", "eu-west-9"],
            "known regions: us-west-1, us-east-1",
        ),
        (["upgrade", "--image", "vllm/vllm-openai:v1", "--env", "=x"], "bad --env"),
        (["migrate", "--from", "us-west-1", "--to", "us-west-1"], "both us-west-1"),
        (["migrate", "--from", "us-west-1", "--to", "mars-1"], "unknown region 'mars-1'"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(
    fleet_config_path: Path, args: list[str], message: str
) -> None:
    out = drctl(*args, config=fleet_config_path)
    assert out.returncode == 2, out
    assert message in out.stderr and "Traceback" not in out.stderr


@pytest.mark.devstack
async def test_backup_create_list_describe_and_restore(
    fleet_config: FleetConfig, fleet_config_path: Path, temporal_client: Client
) -> None:
    cfg = fresh_queues(fleet_config)
    # The restore below writes another namespace: one the fleet config allows a restore into.
    cfg = tuned(cfg, "backup", restore_namespaces=["restored-copy"])
    path = write_config(cfg, fleet_config_path.parent)
    name = f"cli-backup-{uuid.uuid4().hex[:6]}"
    async with running_worker(temporal_client, cfg):
        created = await asyncio.to_thread(
            drctl, "backup", "create", "--name", name, "--region", "us-east-1", "-o", "json", config=path
        )
        assert created.returncode == 0, created.stderr
        info = json.loads(created.stdout)
        assert info["phase"] == "Completed" and info["items"] >= 2
        # It ran as a workflow: visible in the UI under its id, with the operation's search attributes.
        assert info["workflow_id"] == f"backup/{cfg.name}/{name}"
        assert f"/workflows/backup%2F{cfg.name}%2F{name}" in created.stderr
        desc = await temporal_client.get_workflow_handle(info["workflow_id"]).describe()
        attrs = desc.typed_search_attributes
        assert (attrs.get(sa.FLEET), attrs.get(sa.OPERATION), attrs.get(sa.PHASE)) == (
            cfg.name,
            "backup",
            "done",
        )
        again = await asyncio.to_thread(
            drctl, "backup", "create", "--name", name, "--region", "us-east-1", config=path
        )
        assert again.returncode == 2 and "already exists" in again.stderr
        listed = await asyncio.to_thread(
            drctl, "backup", "list", "--region", "us-east-1", "-o", "json", config=path
        )
        assert name in [b["name"] for b in json.loads(listed.stdout)]
        described = await asyncio.to_thread(
            drctl, "backup", "describe", name, "--region", "us-east-1", config=path
        )
        assert described.returncode == 0 and "Completed" in described.stdout
        missing = await asyncio.to_thread(
            drctl, "backup", "describe", "no-such-backup", "--region", "us-east-1", config=path
        )
        assert missing.returncode == 2 and "no backup 'no-such-backup'" in missing.stderr
        # A backup from us-east-1 restores into us-west-1's cluster (shared bucket), into a new namespace.
        restored = await asyncio.to_thread(
            drctl,
            "restore",
            "--backup",
            name,
            "--region",
            "us-west-1",
            "--namespace-mapping",
            f"{cfg.region('us-east-1').kube.namespace}:restored-copy",
            "-o",
            "json",
            config=path,
        )
        assert restored.returncode == 0, restored.stderr
        out = json.loads(restored.stdout)
        assert out["phase"] == "Completed" and out["workflow_id"].startswith(
            f"restore/{cfg.name}/restore-{name}"
        )
        desc = await temporal_client.get_workflow_handle(out["workflow_id"]).describe()
        assert desc.typed_search_attributes.get(sa.OPERATION) == "restore"
    # A backup the policy rejects (unknown storage location: FailedValidation) exits 1 naming why.
    # The storage location is the worker's setting, so this worker runs the broken config.
    lost = fresh_queues(tuned(cfg, "backup", storage_location="nowhere"))
    async with running_worker(temporal_client, lost):
        failed = await asyncio.to_thread(
            drctl,
            "backup",
            "create",
            "--region",
            "us-east-1",
            config=write_config(lost, fleet_config_path.parent),
        )
        assert failed.returncode == 1, failed.stdout + failed.stderr
        assert (
            "FailedValidation" in failed.stderr
            and "nowhere" in failed.stderr
            and "Traceback" not in failed.stderr
        )


def test_render_lists_the_release_each_region_ended_on() -> None:
    res = UpgradeResult(
        upgrade_id="x",
        image="vllm/vllm-openai:v2",
        strategy=Strategy.CANARY,
        outcome=Outcome.ROLLED_BACK,
        reason="analysis failed",
        failed_region="us-east-1",
        releases=[
            RegionRelease(region="us-west-1", image="vllm/vllm-openai:v2", state="upgraded"),
            RegionRelease(region="us-east-1", image="vllm/vllm-openai:v1", state="rolled-back"),
        ],
    )
    console = Console(width=200, record=True)
    render(res, "http://ui/x", console)
    text = console.export_text()
    assert "release us-west-1" in text and "vllm/vllm-openai:v2 (upgraded)" in text
    assert "release us-east-1" in text and "vllm/vllm-openai:v1 (rolled-back)" in text
