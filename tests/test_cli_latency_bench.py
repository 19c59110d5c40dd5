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
    rows = [ln.rsplit(None, 3)[0].strip() for ln in done.stdout.splitlines()[1:-1]]
    assert rows == [
        "temporal --version (baseline)",
        "drctl --version",
        "temporal --help (baseline)",
        "drctl --help",
        "temporal workflow list -h (baseline)",
        "drctl failover -h",
        "drctl status -h",
        "drctl ops --help",
        "drctl config validate -h",
        "temporal <TAB> workflow l (baseline)",
        "drctl <TAB> failover --to us-",
        "drctl <TAB> ops w",
    ], done.stdout
    # Each row's three figures are seconds.
    assert all(float(x) >= 0 for ln in done.stdout.splitlines()[1:-1] for x in ln.split()[-3:])


def test_cli_latency_bench_refuses_a_run_count_out_of_range() -> None:
    done = _bench("--runs", "0")
    assert done.returncode == 2 and "--runs must be 1..200" in done.stderr
