"""bench/fleets_per_worker.py run tiny (1 then 2 fleets, seconds of steady state), and its helpers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.fleets_per_worker import cpu_seconds, mean_probe_s, parse_args, probe_counts, rss_mib
from tests.support.argv import refusal_test
from tests.support.ports import free_port_run

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.ownstack
def test_tiny_run_prints_each_worker_and_the_marginal_cost_with_every_region_probed() -> None:
    cmd = [sys.executable, "bench/fleets_per_worker.py", "--fleets", "2", "--baseline", "1", "--minutes", "0.05",
           "--warmup-s", "2", "--replicas-per-region", "1", "--port-base", str(free_port_run(8))]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=150,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(("fleets_per_worker", "|"))]
    assert "2 regions per fleet, 1 replicas per region, interval 10s, watcher on" in lines[0], done.stdout
    rows = {ln.split("|")[1].strip(): ln for ln in lines[3:]}
    assert set(rows) == {"1", "2", "marginal, per fleet (1 -> 2)"}, done.stdout
    for fleets in ("1", "2"):
        cells = [c.strip() for c in rows[fleets].split("|")[1:-1]]
        assert float(cells[1]) > 0 and float(cells[3]) > 20, rows[fleets]  # a live Python worker uses both
        # Every target answers: a probe that is not HEALTHY is a false one; and the watchers did probe.
        assert float(cells[6]) > 0, rows[fleets]
        bad, total = re.fullmatch(r"(\d+) of (\d+)", cells[7]).groups()  # type: ignore[union-attr]
        assert bad == "0" and int(total) >= 2 * int(fleets), rows[fleets]


def test_probe_counts_take_only_this_phase_s_fleets() -> None:
    page = "\n".join([
        '# HELP drctl_probes_total Probes of a region by resulting status.',
        'drctl_probes_total{fleet="n2-f000",region="east",status="HEALTHY"} 7.0',
        'drctl_probes_total{fleet="n2-f001",region="west",status="DOWN"} 2.0',
        'drctl_probes_total{fleet="n1-f000",region="east",status="DOWN"} 5.0',
        'drctl_probes_created{fleet="n2-f000",region="east",status="HEALTHY"} 1.7e+09',
    ])  # fmt: skip
    assert probe_counts(page, "n2-") == (9, 2)
    assert probe_counts(page, "n1-") == (5, 5)
    durations = "\n".join([
        'drctl_probe_duration_seconds_sum{fleet="n2-f000",region="east"} 3.0',
        'drctl_probe_duration_seconds_count{fleet="n2-f000",region="east"} 4.0',
        'drctl_probe_duration_seconds_sum{fleet="n2-f001",region="west"} 1.0',
        'drctl_probe_duration_seconds_count{fleet="n2-f001",region="west"} 4.0',
        'drctl_probe_duration_seconds_sum{fleet="n1-f000",region="east"} 90.0',
        'drctl_probe_duration_seconds_count{fleet="n1-f000",region="east"} 1.0',
    ])  # fmt: skip
    assert mean_probe_s(durations, "n2-") == 0.5 and mean_probe_s("", "n2-") == 0.0


def test_proc_readers_see_this_process() -> None:
    # The kernel accounts CPU time in ticks, sampled: work until the reader sees it (bounded by 10 s
    # of wall time; a reader stuck at one value fails), not a fixed amount that may fall in one tick.
    spent = cpu_seconds(os.getpid())
    deadline = time.monotonic() + 10
    while cpu_seconds(os.getpid()) <= spent and time.monotonic() < deadline:
        sum(i * i for i in range(300_000))
    assert cpu_seconds(os.getpid()) > spent
    assert 10 < rss_mib(os.getpid()) < 10_000


BAD_ARGUMENTS = [
    (["--fleets", "0"], "--fleets must be in 1..200"),
    (["--fleets", "5", "--baseline", "5"], "--baseline must be at least 1 and fewer than --fleets"),
    (["--minutes", "0"], "--minutes must be in (0, 30]"),
    (["--replicas-per-region", "0"], "--replicas-per-region must be in 1..20"),
]


test_bad_arguments_exit_2_naming_the_problem = refusal_test(parse_args, BAD_ARGUMENTS)
