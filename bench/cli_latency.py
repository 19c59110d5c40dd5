"""How long the CLI takes to answer before it does any work: `drctl --version` and `--help`.

    .venv/bin/python bench/cli_latency.py --runs 10

Times each command as a whole process (start, import, print, exit), `--runs` times, and prints the
minimum, median and maximum, beside the Temporal CLI's `temporal --version` as the baseline in the
same run: a Go binary, the floor an operator's shell already pays. `drctl ops --help` is there too:
it imports its one command module, which the top-level `--help` and `--version` never do.
The issue's target for `drctl --version` and `drctl --help` is 0.3 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).parent
TARGET_S = 0.3


def _time(argv: list[str], runs: int) -> list[float]:
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, timeout=60, env=os.environ | {"NO_COLOR": "1"})
        took.append(time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return took


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/cli_latency.py", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="Runs of each command (default 10).")
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= 200:
        parser.error("--runs must be 1..200")
    return args


def main() -> None:
    args = parse_args()
    drctl = shutil.which("drctl", path=str(BIN)) or shutil.which("drctl")
    temporal = shutil.which("temporal", path=str(BIN)) or shutil.which("temporal")
    if drctl is None or temporal is None:
        raise SystemExit("needs drctl and temporal on PATH or beside this Python (make venv installs both)")
    cases = [
        ("temporal --version (baseline)", [temporal, "--version"]),
        ("drctl --version", [drctl, "--version"]),
        ("drctl --help", [drctl, "--help"]),
        ("drctl ops --help", [drctl, "ops", "--help"]),
    ]
    # Warm the page cache once, so the first case does not pay for every file's first read.
    for _, argv in cases:
        _time(argv, 1)
    print(f"{'command':<32} {'min s':>7} {'median s':>9} {'max s':>7}   ({args.runs} runs each)")
    for label, argv in cases:
        took = _time(argv, args.runs)
        print(f"{label:<32} {min(took):7.3f} {statistics.median(took):9.3f} {max(took):7.3f}")
    print(f"target for drctl --version and --help: {TARGET_S} s")


if __name__ == "__main__":
    main()
