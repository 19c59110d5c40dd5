"""bench/experiment_limits.py runs and prints a row for each near-limit shape (no timing is asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_experiment_limits_bench_prints_each_shape_with_its_outcome_and_baseline() -> None:
    cmd = [sys.executable, "bench/experiment_limits.py", "--repeat", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        "limits now: 262,144 bytes, 50,000 values, depth 32; baseline: 1,048,576 bytes"
    )
    rows = {line.split("  ")[0]: line for line in lines[2:]}
    # Each shape sits where it says: under the limits it is judged valid, over them it is refused.
    assert " valid " in rows["bytes just under the size limit"]
    assert "refused: YAML syntax error" in rows["values just under, broken last line"]
    # Experiments may hold no YAML alias at all (an alias could stand a fault in as a tolerance), so
    # even the expansion under the values limit is refused, by name, and cheaply.
    assert "refused: line" in rows["aliases: 36^3 values"] and "alias" in rows["aliases: 36^3 values"]
    assert "refused: more than 50,000 values" in rows["aliases: 38^3 values (bomb)"]
    assert " valid " in rows["nesting just under the depth limit"]
