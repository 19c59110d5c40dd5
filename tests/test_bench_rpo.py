"""bench/rpo.py: its loss arithmetic, its arguments, and a tiny real run against the session dev stack."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.rpo import Trial, format_table, loss, main, parse_args
from drctl.devstack.stack import StackInfo
from tests.support.argv import refusal_test

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def test_loss_counts_objects_before_the_fault_the_target_lacks() -> None:
    writes = [("a", at(0)), ("b", at(1)), ("c", at(2)), ("d", at(3)), ("late", at(6))]
    assert loss(writes, {"a", "b"}, at(5)) == (2, 4.0)  # c, d lost; newest held b at 1 s
    assert loss(writes, {"a", "b", "c", "d"}, at(5)) == (
        0,
        2.0,
    )  # nothing lost; window = time since the last write
    assert loss(writes, set(), at(5)) == (4, 5.0)  # nothing replicated: the whole run is the window
    assert loss([], set(), at(5)) == (0, 0.0)


def test_table_reports_p50_p95_against_the_target() -> None:
    ts = [
        Trial(
            interval_s=2,
            trial=i,
            written=50,
            lost=lost,
            window_s=w,
            exposure_s=e,
            exposure_objects=lost,
            failover="succeeded",
        )
        for i, (lost, w, e) in enumerate([(10, 2.0, 1.5), (20, 4.0, 3.0), (30, 6.0, 5.0)])
    ]
    lines = format_table(ts, rpo_target_s=5).splitlines()
    assert lines[0].split() == "interval s n lost p50/p95 window s p50/p95 met<=5s exposure s p50".split()
    assert lines[2].split() == ["2", "3", "20/29", "4.0/5.8", "2/3", "3.0"]


BAD_ARGUMENTS = [
    (["--intervals", "2,x"], "--intervals"),
    (["--intervals", "0"], "positive"),
    (["--trials", "0"], "--trials must be >= 1"),
    (["--rate", "500"], "--rate must be in (0, 50]"),
]


test_bad_arguments_exit_2 = refusal_test(parse_args, BAD_ARGUMENTS)


@pytest.mark.slow
@pytest.mark.devstack
def test_tiny_run_against_the_session_stack(
    dev_stack: StackInfo, fleet_config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "rpo.json"
    assert (
        main(
            [
                "--config",
                str(fleet_config_path),
                "--trials",
                "1",
                "--intervals",
                "1,3",
                "--rate",
                "10",
                "--seed",
                "1",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "RPO benchmark: 2 primary-region kills" in text and "window s p50/p95" in text
    trials = [Trial.model_validate(t) for t in json.loads(out.read_text())]
    assert [t.interval_s for t in trials] == [1.0, 3.0]
    for t in trials:
        assert t.failover == "succeeded" and t.written >= 10
        assert 0 <= t.lost <= t.written and t.window_s >= 0
        assert t.exposure_s is not None  # emergency failover recorded its exposure
