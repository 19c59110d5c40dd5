"""A small smoke run of each stack-bringing benchmark, through its command line.

Each run brings up its own private dev stack on free ports, as the bench does for real, with
settings cut down to seconds. The figures are not asserted (noisy 2-core machines); that the run
completes, prints its table and, where the bench says so, sees no false failover, is.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Each run brings up a stack of its own in a subprocess: the `make test-stacks` shard.
pytestmark = pytest.mark.ownstack


def _run(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, (
        f"{argv}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


def test_rto_bench_one_down_trial_of_the_default_monitor(tmp_path: Path) -> None:
    out = tmp_path / "rto.json"
    done = _run(
        "bench/rto.py",
        # --seed as docs/measurements.md runs it: the fault's offset in the probe cycle is reproducible
        *"--trials 1 --kinds down --policies drctl --interval-s 3 --threshold 2 --seed 12 --json".split(),
        str(out),
    )
    assert "RTO benchmark: 1 faults in us-west-1, interval 3s, threshold 2" in done.stdout
    (trial,) = json.loads(out.read_text())["trials"]
    assert (trial["policy"], trial["kind"], trial["failover_status"]) == ("drctl", "down", "succeeded"), trial
    assert trial["detect_s"] is not None and trial["fully_moved"], trial
    # Beside "served elsewhere": the objective restored on us-east-1 under the moved load, after it.
    assert trial["slo_restored_s"] is not None and trial["slo_restored_s"] >= trial["rto_s"], trial
    assert re.search(r"SLO restored = TTFT p99 <= \d+ ms", done.stdout) and "SLO s" in done.stdout
    assert trial["first_move_s"] is not None and trial["first_move_s"] <= trial["rto_s"], trial


def test_history_cost_bench_both_monitors_side_by_side() -> None:
    done = _run(
        "bench/history_cost.py", *"--minutes 0.5 --warmup-s 0 --interval-s 3 --checkpoint-s 10".split()
    )
    assert "rounds" in done.stdout and "watcher" in done.stdout and "target <= 200 events" in done.stdout


def test_false_failover_bench_sees_no_failover(tmp_path: Path) -> None:
    out = tmp_path / "ff.json"
    done = _run(
        "bench/false_failover.py", *"--minutes 0.5 --interval-s 3 --threshold 2 --json".split(), str(out)
    )
    assert done.stdout.count("\n") > 5 and "False-failover bench: 0.5 min" in done.stdout
    data = json.loads(out.read_text())
    assert data["flaps"] >= 2 and [row[0] for row in data["watches"]] == ["drctl", "rounds", "baseline"]
    assert data["watches"][0][2] == "0", done.stdout  # drctl started no failover


def test_partial_bench_runs_all_three_arms_side_by_side(tmp_path: Path) -> None:
    out = tmp_path / "partial.json"
    done = _run(
        "bench/partial.py",
        *"--minutes 0.1 --load-fraction 0.7 --arms none,failover,rebalance --seed 12 --spare-replicas 2 --json".split(),
        str(out),
    )
    assert "Partial-failure benchmark: 1 of 2 us-west-1 replicas killed" in done.stdout
    assert re.search(r"capacity 4 replicas x 16 concurrent .* load 0\.7 of it: [\d.]+ rps", done.stdout)
    arms = {a["arm"]: a for a in json.loads(out.read_text())["arms"]}
    assert list(arms) == ["none", "failover", "rebalance"]
    for a in arms.values():
        assert a["error"] is None and a["reads"] and a["requests"], a["error"]
        # The fault: one of us-west-1's two replicas is gone for the whole window.
        west = {s["source"] for s in a["reads"][-1]["snapshots"] if s["region"] == "us-west-1"}
        assert len(west) == 1, west
    assert arms["none"]["reads"][-1]["weights"] == {"us-west-1": 60, "us-east-1": 40}
    assert arms["failover"]["failover"]["status"] == "succeeded", arms["failover"]["failover"]
    assert arms["rebalance"]["decisions"], "the monitor logged no decision"
