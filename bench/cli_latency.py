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
ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.3


def _time(argv: list[str], runs: int, env: dict[str, str] | None = None) -> list[float]:
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            argv, capture_output=True, timeout=60, env=os.environ | {"NO_COLOR": "1"} | (env or {})
        )
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
    config = str(ROOT / "config" / "fleet.yaml")
    complete = {"_DRCTL_COMPLETE": "complete_bash", "COMP_CWORD": "5"}
    cases: list[tuple[str, list[str], dict[str, str] | None]] = [
        ("temporal --version (baseline)", [temporal, "--version"], None),
        ("drctl --version", [drctl, "--version"], None),
        ("temporal --help (baseline)", [temporal, "--help"], None),
        ("drctl --help", [drctl, "--help"], None),
        ("temporal workflow list -h (baseline)", [temporal, "workflow", "list", "-h"], None),
        ("drctl failover -h", [drctl, "failover", "-h"], None),
        ("drctl status -h", [drctl, "status", "-h"], None),
        ("drctl ops --help", [drctl, "ops", "--help"], None),
        ("drctl config validate -h", [drctl, "config", "validate", "-h"], None),
        ("temporal <TAB> workflow l (baseline)", [temporal, "__complete", "workflow", "l"], None),
        (
            "drctl <TAB> failover --to us-",
            [drctl],
            complete | {"COMP_WORDS": f"drctl failover -c {config} --to us-"},
        ),
        ("drctl <TAB> ops w", [drctl], complete | {"COMP_WORDS": "drctl ops w", "COMP_CWORD": "2"}),
    ]
    # Warm the page cache once, so the first case does not pay for every file's first read.
    for _, argv, env in cases:
        _time(argv, 1, env)
    print(f"{'command':<40} {'min s':>7} {'median s':>9} {'max s':>7}   ({args.runs} runs each)")
    for label, argv, env in cases:
        took = _time(argv, args.runs, env)
        print(f"{label:<40} {min(took):7.3f} {statistics.median(took):9.3f} {max(took):7.3f}")
    print(f"target for drctl help and completion: {TARGET_S} s")


if __name__ == "__main__":
    main()
