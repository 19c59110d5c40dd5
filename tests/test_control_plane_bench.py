"""A short run of bench/control_plane.py through its command line, on the private stack it brings up.

The figures are not asserted (noisy 2-core machines); that all three cases run side by side, each
stops what it says before the region dies, and the table is printed, is. With the data plane off
and Temporal stopped nothing can move users, so there the dead region's share fails: the bench
sees errors when there are some.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.ownstack


@pytest.mark.parametrize("data_plane", ["on", "off"])
def test_control_plane_bench_runs_the_three_cases_side_by_side(data_plane: str, tmp_path: Path) -> None:
    out = tmp_path / "cp.json"
    done = subprocess.run(
        [
            sys.executable,
            "bench/control_plane.py",
            *"--window-s 8 --warmup-s 2 --rps 5 --data-plane".split(),
            data_plane,
            "--json",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=420,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Control-plane loss bench: us-west-1 (weight 60) dies at t=0" in done.stdout
    cases = {c["case"]: c for c in json.loads(out.read_text())["cases"]}
    assert list(cases) == ["temporal-up", "temporal-stopped", "temporal-and-worker-stopped"]
    assert cases["temporal-up"]["stopped"] == []
    assert [s.split(" ")[0] for s in cases["temporal-stopped"]["stopped"]] == ["temporal"]
    assert [s.split(" ")[0] for s in cases["temporal-and-worker-stopped"]["stopped"]] == [
        "temporal",
        "worker-us-west-1",
    ]
    for case in cases.values():
        # Users were sent requests through the whole window after the region died.
        after = [at for at, _ in case["requests"] if at >= 0]
        assert after and max(after) > 6, case["case"]
        assert set(case["weights_at_end"]) == {"us-west-1", "us-east-1"}
    if data_plane == "off":
        for name in ("temporal-stopped", "temporal-and-worker-stopped"):
            failed = [at for at, ok in cases[name]["requests"] if at >= 0 and not ok]
            assert failed, f"{name}: no user request failed with us-west-1 dead and nothing to move them"
