"""The decision core against a plain interval x threshold policy, in the fleet simulator's worlds.

    .venv/bin/python bench/decisions.py --seeds 30

For every scenario family (drctl/simulation/scenarios.py) it runs `--seeds` generated worlds of 2 to
5 regions, each twice in the same run: once decided by drctl's core (drctl.decision.decide, its
invariants asserted after every decision) and once by the baseline (a region failing `threshold`
checks in a row goes to 0, its share split by home weight; back whole after `threshold` passes).
It prints one table: per family and policy, time to safe (no weight in effect on a region that
cannot serve), time to the objective after the first fault, user error share and moves, as
median/worst (errors and moves: mean/worst), measured against the simulated world's truth
(drctl/simulation/report.py). Simulated time, so it takes seconds of CPU and prints instead of
asserting; a world where the core breaks an invariant or crashes is listed with its replay command
(and the exit status is 1).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as `python bench/decisions.py`: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.args import BenchParser
from drctl.simulation.report import FamilyRow, Metrics, format_table, summarise
from drctl.simulation.run import InvariantViolated, run
from drctl.simulation.scenarios import FAMILIES, generate

POLICIES = ("core", "baseline")


def _families(text: str) -> list[str]:
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    for name in names:
        if name not in FAMILIES:
            raise ValueError(f"unknown family {name!r}; known: {', '.join(FAMILIES)}")
    return names


def parse_args(argv: Sequence[str] | None = None) -> tuple[int, int, list[str]]:
    p = BenchParser(prog="bench/decisions.py", description=__doc__.split("\n")[0])
    p.number("--seeds", 30, "Worlds per family", "1..10000")
    p.number("--first-seed", 0, "Seed of the first world", ">= 0")
    p.add_argument("--families", default=",".join(FAMILIES), help="Comma-separated families (default all)")
    args = p.parse_args(argv)
    try:
        families = _families(args.families)
    except ValueError as exc:
        p.error(f"--families: {exc}")
    if not families:
        p.error("--families: name at least one family")
    return args.seeds, args.first_seed, families


def main(argv: Sequence[str] | None = None) -> int:
    seeds, first, families = parse_args(argv)
    started = time.process_time()
    rows: list[FamilyRow] = []
    violations: list[str] = []
    crashes: list[str] = []
    for family in families:
        runs: dict[str, list[Metrics]] = {p: [] for p in POLICIES}
        for seed in range(first, first + seeds):
            scenario = generate(seed, family)
            for policy in POLICIES:
                try:
                    result = run(scenario, policy)
                except InvariantViolated as exc:
                    first_line, replay = str(exc).splitlines()[:2]
                    violations.append(f"{first_line}  {replay}")
                    continue
                except Exception as exc:  # a crash of the policy is a finding to print, not the end
                    notes = " ".join(getattr(exc, "__notes__", []))
                    crashes.append(f"{type(exc).__name__}: {exc}; {notes}")
                    continue
                assert result.metrics is not None
                runs[policy].append(result.metrics)
        rows += [summarise(family, policy, runs[policy]) for policy in POLICIES if runs[policy]]
    print(
        f"Decision bench: {seeds} simulated worlds per family (seeds {first}..{first + seeds - 1}), "
        f"2-5 regions, core vs plain interval x threshold baseline"
    )
    print(format_table(rows))
    print(
        "safe: longest stretch with weight on a region that cannot serve (unsafe at end: still so when "
        "the run stops); objective: from the first fault until users' errors and TTFT p99 stay within "
        "it (never: not by the end)"
    )
    print(f"invariant violations by the core: {len(violations)}")
    for line in violations:
        print(f"  {line}")
    print(f"policy crashes: {len(crashes)}")
    for line in crashes:
        print(f"  {line}")
    print(f"CPU {time.process_time() - started:.1f} s")
    return 1 if violations or crashes else 0


if __name__ == "__main__":
    sys.exit(main())
