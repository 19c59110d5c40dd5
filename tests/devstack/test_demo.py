"""`make demo`, as the README gives it to a new user, on a private stack: it ends well (exit 0), its
last screen says the fleet is failed over on purpose and how to fail back, and the failover reports
the objective honestly on an idle stack (nothing to judge it by, not "not restored")."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from drctl.config.schema import load_config
from drctl.devstack import stack
from tests.support.config import write_fleet_config

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.ownstack]


def test_make_demo_ends_well_and_reports_the_objective_honestly() -> None:
    path = write_fleet_config()
    cfg = load_config(path)
    env = {**os.environ, "COLUMNS": "80"}
    try:
        done = subprocess.run(
            ["make", "--no-print-directory", "demo", f"CONFIG={path}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        out = done.stdout
        assert done.returncode == 0, out[-4000:] + done.stderr[-4000:]
        # make echoes each command: the last screen is what the last `drctl status` printed.
        last_status = out[out.rindex(f".venv/bin/drctl status -c {path}") :]
        assert "FAILED OVER on purpose" in last_status, last_status
        assert f"drctl failback -c {path} --yes" in out
        # The failover's objective line: with no user load there is nothing to judge it by, and it
        # says so after one window instead of "not restored" at the RTO target.
        assert "SLO restored" in out and "no traffic to judge" in out, out[-4000:]
        assert "not restored" not in out
    finally:
        stack.down(cfg)
        shutil.rmtree(path.parent, ignore_errors=True)
