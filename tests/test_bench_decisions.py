"""bench/decisions.py runs tiny and prints its table: core and baseline side by side per family.

The figures are not asserted (a bench prints them beside the baseline); that both policies ran
every family, that the columns are there and that the core broke no invariant, are.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.decisions import parse_args
from tests.support.argv import refusal_test

ROOT = Path(__file__).resolve().parents[1]


def test_the_bench_prints_each_family_for_both_policies_with_its_figures() -> None:
    cmd = [
        sys.executable,
        "bench/decisions.py",
        "--seeds",
        "2",
        "--first-seed",
        "5",
        "--families",
        "down,tier_restart",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Decision bench: 2 simulated worlds per family (seeds 5..6), 2-5 regions")
    assert lines[1].split() == [
        *"family policy runs safe s med/max objective s med/max user errors mean/max moves mean/max".split()
    ]
    rows = [line.split() for line in lines[2:6]]
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("down", "core", "2"),
        ("down", "baseline", "2"),
        ("tier_restart", "core", "2"),
        ("tier_restart", "baseline", "2"),
    ]
    for row in rows:
        # The errors column is a mean/max of percentages; moves a mean/max count.
        assert row[-2].endswith("%") and "%/" in row[-2] and "/" in row[-1], row
    assert "invariant violations by the core: 0" in done.stdout and "policy crashes: 0" in done.stdout


def test_defaults() -> None:
    seeds, first, families = parse_args([])
    assert (seeds, first, len(families)) == (30, 0, 10)


BAD_ARGUMENTS = [
    (["--seeds", "0"], "--seeds must be in 1..10000"),
    (["--families", "down,meteor"], "--families: unknown family 'meteor'; known: down, slow"),
    (["--families", ","], "--families: name at least one family"),
]

test_bad_arguments_exit_2_naming_the_problem = refusal_test(parse_args, BAD_ARGUMENTS)
