"""bench/probe_scale.py run tiny (N=20, one round) through its command line, and its argument checks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench.probe_scale import format_table, parse_args, summarise
from tests.support.argv import refusal_test
from tests.support.ports import free_port_run

ROOT = Path(__file__).resolve().parent.parent


def test_tiny_run_prints_both_probers_with_no_false_down(tmp_path: Path) -> None:
    out = tmp_path / "rows.json"
    cmd = [sys.executable, "bench/probe_scale.py", "--sizes", "20", "--rounds", "1",
           "--port-base", str(free_port_run(20)), "--json", str(out)]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("probe_scale ") and "concurrency 64, sample 0.1, 1 round(s)" in lines[0]
    rows = {line.split("|")[2].strip(): line for line in lines[3:]}
    assert set(rows) == {"old", "new"}
    # Twenty healthy targets are well inside either prober's budget: any DOWN here is a bug.
    assert all(line.rstrip(" |").endswith("| 0 | 0") for line in rows.values()), done.stdout
    assert out.read_text().count('"prober"') == 2


BAD_ARGUMENTS = [
    (["--sizes", "5001"], "--sizes must each be in 1..5000"),
    (["--sizes", "a,b"], "--sizes must be comma-separated integers"),
    (["--rounds", "0"], "--rounds must be in 1..20"),
    (["--concurrency", "65"], "--concurrency must be in 1..64"),
    (["--sample", "0"], "--sample must be in (0, 1]"),
]


test_bad_arguments_exit_2_naming_the_problem = refusal_test(parse_args, BAD_ARGUMENTS)


def test_summary_and_table_arithmetic() -> None:
    rounds = [{"wall_s": 1.0, "cpu_s": 0.5, "false_down": 0, "unprobed": 1},
              {"wall_s": 3.0, "cpu_s": 1.5, "false_down": 2, "unprobed": 0}]  # fmt: skip
    row = summarise("new", 100, rounds)
    assert (row["wall_s"], row["wall_max_s"], row["cpu_s"], row["cpu_max_s"], row["false_down"]) == (
        2.0,
        3.0,
        1.0,
        1.5,
        2,
    )
    assert format_table([row]).splitlines()[-1] == "| 100 | new | 2.00 (3.00) | 1.00 (1.50) | 2 | 1 |"
