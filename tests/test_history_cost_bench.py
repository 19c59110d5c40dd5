"""bench/history_cost.py without a stack: its command line and the per-region-hour arithmetic it prints."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest

from bench.history_cost import main, measure, parse_args, render
from tests.support.argv import refusal_test
from tests.support.docs_text import page

T0 = datetime(2026, 11, 30, 12, 0, 0)


def test_defaults_are_the_products_settings() -> None:
    args = parse_args([])
    assert (args.minutes, args.interval_s, args.checkpoint_s, args.warmup_s) == (3.0, 10.0, 600.0, 30.0)
    assert parse_args(["--minutes", "0.5", "--warmup-s", "0"]).minutes == 0.5


BAD_ARGUMENTS = [
    (["--minutes", "0"], "--minutes must be in (0, 60]"),
    (["--minutes", "61"], "--minutes must be in (0, 60]"),
    (["--interval-s", "1"], "--interval-s must be in (2, 600]"),
    (["--checkpoint-s", "5"], "--checkpoint-s must be in [10, 3600]"),
    (["--minutes", "1", "--warmup-s", "60"], "--warmup-s must be at least 0 and shorter than the run"),
]


test_bad_arguments_exit_2_naming_the_problem = refusal_test(main, BAD_ARGUMENTS)


def test_events_and_bytes_per_region_hour_over_the_steady_window_and_the_whole_run() -> None:
    # 10 start-up events of 100 bytes in the first 30 s, then 12 events of 50 bytes every 10 s for 330 s.
    events = [(T0 + timedelta(seconds=i), 100) for i in range(10)]
    events += [(T0 + timedelta(seconds=30 + 10 * k), 50) for k in range(34) for _ in range(12)]
    end = T0 + timedelta(seconds=360)
    c = measure("rounds", 2, events, T0, end, warmup_s=30)
    assert (c.events, c.bytes, c.seconds) == (418, 1000 + 408 * 50, 360)
    assert (c.steady_events, c.steady_seconds) == (408, 330)
    # 408 events in 330 s over 2 regions: 408 x 3600 / (2 x 330).
    assert c.per_region_hour(c.steady_events, c.steady_seconds) == pytest.approx(2225.45, abs=0.01)
    assert c.per_region_hour(c.bytes, c.seconds) == pytest.approx(107000.0)
    quiet = measure("watcher", 2, events[:10], T0, end, warmup_s=30)
    assert quiet.steady_events == 0 and quiet.per_region_hour(quiet.steady_events, quiet.steady_seconds) == 0
    out = render([c, quiet], 6, 10, 600)
    assert "2 regions" in out and "target <= 200 events" in out
    assert [line.split()[0] for line in out.splitlines()[3:]] == ["rounds", "watcher"]
    assert out.splitlines()[3].split()[1] == "2225"


def test_the_readmes_command_line_parses() -> None:
    """docs/measurements.md's run, as written there (a real run brings its own stack up for minutes: not here)."""
    found = re.search(r"`\.venv/bin/python bench/history_cost\.py ([^`]*)`", page("docs/measurements.md"))
    assert found, "docs/measurements.md shows no bench/history_cost.py run"
    args = parse_args(found.group(1).split())
    assert (args.minutes, args.checkpoint_s) == (3.0, 60.0)
