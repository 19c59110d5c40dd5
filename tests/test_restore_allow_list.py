"""Restores write only into namespaces the fleet config allows: the region's own workload namespace
and `backup.restore_namespaces`. The worker's provider refuses any other before calling Velero (whose
own rights are cluster-wide), and the CLI refuses it before starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from drctl.config.schema import load_config
from drctl.models.backup import RestoreRequest
from drctl.providers.errors import ProviderError
from drctl.providers.velero import VeleroBackupProvider
from tests.support.cli import run_cli
from tests.support.config import fleet_config_data


@pytest.fixture()
def cfg_path(tmp_path: Path) -> Path:
    data = fleet_config_data()
    data["backup"] = {"restore_namespaces": ["inference-restored"]}
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_provider_refuses_a_restore_outside_the_allow_list(cfg_path: Path) -> None:
    cfg = load_config(cfg_path)
    # Nothing listens there: a refusal that reached the API would fail differently (Unavailable).
    api = k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:1"))
    velero = VeleroBackupProvider(cfg, "us-east-1", api=api)
    assert cfg.restore_namespaces("us-east-1") == ["inference", "inference-restored"]
    for target in ("kube-system", "velero", "other-team"):
        req = RestoreRequest(
            region="us-east-1", name="r1", backup_name="b1", namespace_mapping={"inference": target}
        )
        with pytest.raises(ProviderError) as refused:
            velero.create_restore(req)
        assert refused.value.error.kind == "Forbidden" and not refused.value.error.retryable
        assert target in str(refused.value) and "backup.restore_namespaces" in str(refused.value)


def test_the_cli_refuses_a_restore_outside_the_allow_list(cfg_path: Path) -> None:
    code, _, err = run_cli(
        [
            "restore",
            "--backup",
            "b1",
            "--region",
            "us-east-1",
            "--namespace-mapping",
            "inference:kube-system",
            "-c",
            str(cfg_path),
        ]
    )
    assert code == 2 and "kube-system is not a namespace a restore may write" in err, err


def test_the_cli_dry_run_shows_which_namespaces_the_restore_writes(cfg_path: Path) -> None:
    """Unmapped, only the allowed namespaces are restored in place; a mapping adds its source."""
    code, out, err = run_cli(
        ["restore", "--backup", "b1", "--region", "us-east-1", "-c", str(cfg_path), "--dry-run"]
    )
    assert code == 0, err
    assert "inference → inference, inference-restored → inference-restored" in out, out
    mapped = ["--namespace-mapping", "team-b:inference-restored"]
    code, out, err = run_cli(["restore", "--backup", "b1", "-c", str(cfg_path), "--dry-run", *mapped])
    assert code == 0 and "inference-restored → inference-restored, team-b → inference-restored" in out, out
