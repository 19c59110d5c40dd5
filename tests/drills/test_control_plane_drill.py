"""experiments/control-plane-loss.json by the real `chaos run`, on a dev stack of its own with its workers.

us-west-1 dies with drctl's Temporal server and its own worker. With the data plane on (the
product's default: fast path and gateway health checks), users of the global endpoint are served
by us-east-1 within the RTO while nothing of drctl runs, and the rollback brings Temporal and the
worker back. With the data plane off, nothing can move users: the same experiment FAILs on its
RTO probe, and its rollback still restores the control plane.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from drctl.chaos.faults import still_injected
from drctl.chaos.journal import judge
from drctl.config.schema import FleetConfig, load_config
from drctl.devstack import prometheus, readiness, stack
from drctl.devstack.restart import restart_global_gateway
from tests.support.cli import drctl
from tests.support.config import REPO, write_fleet_config

pytestmark = pytest.mark.ownstack

EXPERIMENT = REPO / "experiments" / "control-plane-loss.json"
TARGET = "us-west-1"
RTO_PROBE = "traffic-served-elsewhere-within-rto"


@pytest.fixture(scope="module")
def devstack() -> Iterator[tuple[FleetConfig, Path]]:
    path = write_fleet_config(data_plane=True)
    cfg = load_config(path)
    try:
        # As docs/operations.md shows it: the stack with one worker per region, as in production.
        up = drctl("dev", "up", "--workers", "-c", str(path), timeout_s=300)
        assert up.returncode == 0, up.stdout + up.stderr
        yield cfg, path
    finally:
        stack.down(cfg)
        shutil.rmtree(path.parent, ignore_errors=True)


def _chaos_run(path: Path, workdir: Path, rto_s: float) -> dict:
    """`chaos run` as docs/operations.md shows it, with the target and RTO from the environment."""
    journal = workdir / "journal.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "DRCTL_CONFIG": str(path),
        "DRCTL_DRILL_TARGET": TARGET,
        "DRCTL_RTO_TARGET_S": str(rto_s),
    }
    argv = [
        sys.executable,
        "-m",
        "chaostoolkit",
        "--no-version-check",
        "--log-file",
        str(workdir / "chaos.log"),
    ]
    run = ["run", "--journal-path", str(journal), "--rollback-strategy", "always", str(EXPERIMENT)]
    subprocess.run([*argv, *run], cwd=workdir, env=env, capture_output=True, timeout=180, check=False)
    return json.loads(journal.read_text())


def _outputs(entries: list[dict]) -> dict[str, object]:
    return {e["activity"]["name"]: e.get("output") for e in entries}


def _control_plane_back(cfg: FleetConfig) -> None:
    temporal_bin = stack.components(cfg, Path(cfg.source_path or ""))[0].argv[0]
    assert readiness.temporal_ready(temporal_bin, cfg) is None
    port = prometheus.worker_port(cfg, TARGET)
    assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    assert still_injected(cfg, TARGET) == []


def test_the_data_plane_carries_users_while_temporal_and_the_worker_are_down(
    devstack: tuple[FleetConfig, Path], tmp_path: Path
) -> None:
    cfg, path = devstack
    journal = _chaos_run(path, tmp_path, rto_s=20)
    verdict = judge(journal)
    assert verdict.reasons == [], verdict.reasons
    assert verdict.steady_state_after_met is True  # users served with the control plane still down
    run = _outputs(journal["run"])
    assert "temporal (pid" in run["stop-temporal-hosted-by-target-region"]["affected"][0]  # type: ignore[index]
    assert run["stop-target-region-worker"]["affected"][0].startswith(f"worker-{TARGET} (pid")  # type: ignore[index]
    (rollback,) = _outputs(journal["rollbacks"]).values()
    assert rollback["restarted"] == ["temporal", f"worker-{TARGET}"], rollback  # type: ignore[index]
    _control_plane_back(cfg)


def test_without_the_data_plane_the_drill_fails_on_its_rto_and_still_restores(
    devstack: tuple[FleetConfig, Path], tmp_path: Path
) -> None:
    cfg, path = devstack
    tier = cfg.traffic.global_tier.model_copy(update={"fast_path": False, "health_checks": False})
    off = cfg.model_copy(update={"traffic": cfg.traffic.model_copy(update={"global_tier": tier})})
    restart_global_gateway(off, path)
    try:
        journal = _chaos_run(path, tmp_path, rto_s=6)
    finally:
        restart_global_gateway(cfg, path)
    verdict = judge(journal)
    assert RTO_PROBE in verdict.failed_probes, verdict.reasons
    assert verdict.rollbacks_ok == 1, verdict.reasons
    _control_plane_back(cfg)
