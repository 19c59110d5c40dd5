"""bench/config_scale.py runs and prints its two figures and their ratio (no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_config_scale_bench_prints_the_baseline_the_fleet_and_the_ratio() -> None:
    cmd = [sys.executable, "bench/config_scale.py", "--regions", "200", "--baseline", "20"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("baseline     20 regions") and lines[1].startswith("fleet       200 regions")
    assert "linear extrapolation of the baseline" in lines[2]


def test_config_scale_bench_refuses_a_baseline_not_below_the_fleet() -> None:
    cmd = [sys.executable, "bench/config_scale.py", "--regions", "20", "--baseline", "20"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "--baseline < --regions" in done.stderr
