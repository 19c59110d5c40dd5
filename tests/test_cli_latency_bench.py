"""bench/cli_latency.py runs and prints a row per command beside its baseline (no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "bench/cli_latency.py", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )


def test_cli_latency_bench_prints_each_command_beside_the_temporal_baseline() -> None:
    done = _bench("--runs", "2")
    assert done.returncode == 0, done.stderr
    rows = [" ".join(ln.split()[0:2]) for ln in done.stdout.splitlines()[1:-1]]
    assert rows == ["temporal --version", "drctl --version", "drctl --help", "drctl ops"]


def test_cli_latency_bench_refuses_a_run_count_out_of_range() -> None:
    done = _bench("--runs", "0")
    assert done.returncode == 2 and "--runs must be 1..200" in done.stderr
