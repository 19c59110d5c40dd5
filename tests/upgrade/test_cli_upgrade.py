"""`drctl upgrade`, `drctl migrate`, `drctl backup` and `drctl restore` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from drctl.config import FleetConfig


def drctl(*args: str, config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # rich tables keep whole cells on a wide terminal
    return subprocess.run([sys.executable, "-m", "drctl.cli.main", *args, "--config", str(config)],
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize(("args", "message"), [
    (["upgrade", "--image", "Not An Image"], "bad image reference"),
    (["upgrade", "--image", "vllm/vllm-openai"], "tag or @sha256 digest"),
    (["upgrade", "--image", "vllm/vllm-openai:v1", "--steps", "50,25,100"], "bad --steps"),
    (["upgrade", "--image", "vllm/vllm-openai:v1", "--steps", "5,25"], "end at 100"),
    (["upgrade", "--image", "vllm/vllm-openai:v1", "--regions", "eu-west-9"], "known regions: us-west-1, us-east-1"),
    (["upgrade", "--image", "vllm/vllm-openai:v1", "--env", "=x"], "bad --env"),
    (["migrate", "--from", "us-west-1", "--to", "us-west-1"], "both us-west-1"),
    (["migrate", "--from", "us-west-1", "--to", "mars-1"], "unknown region 'mars-1'"),
])
def test_bad_input_exits_2_with_a_clear_message(fleet_config_path: Path, args: list[str], message: str) -> None:
    out = drctl(*args, config=fleet_config_path)
    assert out.returncode == 2, out
    assert message in out.stderr and "Traceback" not in out.stderr


@pytest.mark.devstack
def test_backup_create_list_describe_and_restore(fleet_config: FleetConfig, fleet_config_path: Path,
                                                 dev_stack: object) -> None:
    created = drctl("backup", "create", "--name", "cli-backup-1", "--region", "us-east-1", "-o", "json",
                    config=fleet_config_path)
    assert created.returncode == 0, created.stderr
    info = json.loads(created.stdout)
    assert info["phase"] == "Completed" and info["items"] >= 2
    listed = drctl("backup", "list", "--region", "us-east-1", "-o", "json", config=fleet_config_path)
    assert "cli-backup-1" in [b["name"] for b in json.loads(listed.stdout)]
    described = drctl("backup", "describe", "cli-backup-1", "--region", "us-east-1", config=fleet_config_path)
    assert described.returncode == 0 and "Completed" in described.stdout
    missing = drctl("backup", "describe", "no-such-backup", "--region", "us-east-1", config=fleet_config_path)
    assert missing.returncode == 2 and "no backup 'no-such-backup'" in missing.stderr
    # A backup from us-east-1 restores into us-west-1's cluster (shared bucket), into a new namespace.
    restored = drctl("restore", "--backup", "cli-backup-1", "--region", "us-west-1", "--namespace-mapping",
                     f"{fleet_config.region('us-east-1').kube.namespace}:restored-copy", "-o", "json",
                     config=fleet_config_path)
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["phase"] == "Completed"
