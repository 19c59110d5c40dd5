"""bench/config_scale.py runs and prints each kind and size beside the quadratic baseline (no timing
is asserted), and judges its configs as the loader does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.config_scale import quadratic_check, regions_text, webhooks_text
from drctl.config.schema import parse_config

ROOT = Path(__file__).resolve().parents[1]


def test_config_scale_bench_prints_each_kind_and_size_beside_the_baseline() -> None:
    cmd = [
        sys.executable,
        "bench/config_scale.py",
        "--sizes",
        "30,20",
        "--quadratic-max",
        "20",
    ]  # as docs/measurements.md
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert "quadratic s" in header and "verdict" in header
    assert [r.split()[:2] for r in rows] == [
        ["webhooks", "20"],
        ["webhooks", "30"],
        ["regions", "20"],
        ["regions", "30"],
    ]
    assert all(r.endswith("valid") for r in rows), rows
    assert "est." in rows[1] and "est." not in rows[0]  # 30 is above --quadratic-max: extrapolated


def test_the_bench_configs_are_what_it_says() -> None:
    text, names = webhooks_text(5)
    assert len(parse_config(text, "w.yaml").notifications.webhooks) == 5 == len(set(names))
    text, gateways = regions_text(5)
    assert [r.gateway_url for r in parse_config(text, "r.yaml").regions] == gateways
    assert quadratic_check(["a", "b", "a"]) == ["a"] and quadratic_check(names) == []


def test_config_scale_bench_refuses_sizes_out_of_range() -> None:
    cmd = [sys.executable, "bench/config_scale.py", "--sizes", "0,200000"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "--sizes in 1..100000" in done.stderr
