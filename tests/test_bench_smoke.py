"""bench/rto.py without a stack: its command line, its config, and the figures it prints.

A real bench run brings its own dev stack up and injects faults for minutes, far beyond a test
budget, so the runner is exercised by running the bench; here the arithmetic that turns trial
records into the printed table is checked on real Trial and LoadSample records.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench import rto_fleet
from bench.rto import fast_path_on, health_checks_on, main, parse_args, policy_config, write_json
from bench.rto_report import Trial, error_window, format_table, percentile, ratios, summarise
from drctl.models.drill import LoadSample
from drctl.models.fleet_spec import FleetSpec
from tests.support.argv import refusal_test

T0 = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def test_defaults_and_degraded_expands_to_both_shapes() -> None:
    args = parse_args([])
    assert (args.trials, args.interval_s, args.threshold, args.keep_stack) == (3, 10.0, 3, False)
    assert args.kinds == ["down", "slow", "errors"]
    assert args.policies == ["drctl", "fastpath", "rounds", "baseline"]
    assert parse_args(["--kinds", "errors,down,errors", "--trials", "2"]).kinds == ["errors", "down"]


BAD_ARGUMENTS = [
    (["--kinds", "down,meltdown"], "unknown fault kind 'meltdown'; known: down, slow, errors, degraded"),
    (["--trials", "0"], "--trials must be >= 1"),
    (["--rps", "500"], "--rps must be in (0, 100]"),
    (
        ["--policies", "drctl,fastest"],
        "unknown policy 'fastest'; known: drctl, fastpath, rounds, baseline",
    ),
]


test_bad_arguments_exit_2_naming_the_problem = refusal_test(parse_args, BAD_ARGUMENTS)


def test_bench_config_is_the_reference_fleet_and_policies_differ_only_in_their_one_setting() -> None:
    path = rto_fleet.write_bench_config(interval_s=10, threshold=3)
    try:
        cfg = rto_fleet.load(path)
        assert cfg.weights == {"us-west-1": 60, "us-east-1": 40}
        ports = [cfg.temporal.address, cfg.traffic.global_endpoint, *(r.gateway_url for r in cfg.regions)]
        assert len(set(ports)) == len(ports)
        ours, rounds, base = (
            FleetSpec.from_config(policy_config(cfg, p)) for p in ("drctl", "rounds", "baseline")
        )
        assert ours.watcher and ours.fast_confirm
        assert not rounds.watcher and rounds.fast_confirm
        assert not base.watcher and not base.fast_confirm
        assert ours.quorum.mode == "majority" and rounds.quorum.mode == base.quorum.mode == "off"
        assert ours.rebalance == "automatic" and rounds.rebalance == base.rebalance == "off"
        settings = {"fast_confirm", "watcher", "quorum", "rebalance"}
        assert (
            ours.model_dump(exclude=settings)
            == rounds.model_dump(exclude=settings)
            == base.model_dump(exclude=settings)
        )
        assert (base.interval_s, base.failure_threshold) == (10, 3)
        assert (
            policy_config(cfg, "drctl").health.passive.enabled
            and not policy_config(cfg, "rounds").health.passive.enabled
        )
        # The data plane is on by default; every policy but fastpath measures drctl alone.
        assert fast_path_on(cfg) and health_checks_on(cfg)
        fast = policy_config(cfg, "fastpath")
        assert fast_path_on(fast) and health_checks_on(fast)
        for p in ("drctl", "rounds", "baseline"):
            assert not fast_path_on(policy_config(cfg, p)) and not health_checks_on(policy_config(cfg, p)), p
        assert FleetSpec.from_config(fast) == ours
    finally:
        shutil.rmtree(path.parent)


def test_error_window_counts_errors_and_slow_requests_after_the_fault_only() -> None:
    samples = [
        LoadSample(t=at(-1.0), ok=False, latency_ms=5),  # before the fault: not this fault's doing
        LoadSample(t=at(0.5), ok=True, region="us-west-1", latency_ms=160),
        LoadSample(t=at(1.0), ok=False, latency_ms=4),
        LoadSample(t=at(2.0), ok=True, region="us-west-1", latency_ms=3050),  # 20x TTFT: over the 2 s SLO
        LoadSample(t=at(4.25), ok=False, latency_ms=3),
        LoadSample(t=at(5.0), ok=True, region="us-east-1", latency_ms=150),
    ]
    assert error_window(samples, T0, slo_ms=2000) == (3.25, 3)
    assert error_window(samples[:2] + samples[-1:], T0, slo_ms=2000) == (0.0, 0)


def _trial(
    policy: str, n: int, detect: float, window: float, rto: float, ok: bool = True, move: float | None = None
) -> Trial:
    return Trial(
        policy=policy,
        kind="down",
        trial=n,
        offset_s=1.0,
        fault_at=T0,  # type: ignore[arg-type]
        failover_status="succeeded" if ok else "failed",
        first_move_s=move,
        detect_s=detect,
        orchestration_s=2.0,
        error_window_s=window,
        rto_s=rto,
        fully_moved=ok,
        requests=200,
        bad_requests=40,
    )


def test_p50_interpolates_so_two_trials_are_not_just_the_faster_one() -> None:
    assert percentile([12.0, 9.0], 50) == 10.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == 4.8
    assert percentile([7.0], 50) == 7.0
    assert percentile([], 50) is None


TRIALS = [
    # Served elsewhere at 5 and 7 s; the objective held at 14 s (in time) and 42 s (too late).
    _trial("drctl", 1, detect=3.0, window=3.5, rto=5.0, move=1.5).model_copy(update={"slo_restored_s": 14.0}),
    _trial("drctl", 2, detect=5.0, window=5.5, rto=7.0, move=2.5).model_copy(update={"slo_restored_s": 42.0}),
    _trial("baseline", 1, detect=20.0, window=21.0, rto=22.0),
    _trial("baseline", 2, detect=28.0, window=33.0, rto=32.0, ok=False),
]


def test_table_and_ratio_from_trial_records() -> None:
    rows = summarise(TRIALS, rto_target_s=30)
    assert [(r.policy, r.succeeded, r.rto_met, r.moved) for r in rows] == [
        ("drctl", 2, 2, 2),
        ("baseline", 1, 1, 1),
    ]
    assert ratios(rows) == {"down": {"detection": 6.0, "error_window": 6.0, "rto": 4.5}}
    text = format_table(rows, rto_target_s=30).splitlines()
    head = (
        "policy kind n ok first move s detect s orchestr s err window s RTO s met<=30s SLO s slo<=30s moved"
    )
    assert text[0].split() == head.split()
    assert (
        text[2].split()
        == "drctl down 2 2 2.0/2.5 4.0/4.9 2.0/2.0 4.5/5.4 6.0/6.9 2/2 28.0/40.6 1/2 2/2".split()
    )
    assert (
        text[3].split()
        == "baseline down 2 1 -/- 24.0/27.6 2.0/2.0 27.0/32.4 27.0/31.5 1/2 -/- 0/2 1/2".split()
    )
    assert text[-2] == "ratio baseline/drctl (p50; >1 means drctl is faster):"
    assert text[-1].split() == ["down", "detection", "6.00x", "error", "window", "6.00x", "RTO", "4.50x"]


def test_saved_run_prints_the_same_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    st = {
        "region": "us-west-1",
        "interval_s": 10.0,
        "failure_threshold": 3,
        "fast_confirm_interval_s": 1.0,
        "rps": 20.0,
        "base_ttft_ms": 150.0,
        "ttft_degraded_ms": 2000.0,
        "rto_target_s": 30.0,
        "seed": 7,
    }
    write_json(tmp_path / "run.json", st, TRIALS)
    assert main(["--report", str(tmp_path / "run.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("RTO benchmark: 4 faults in us-west-1, interval 10s, threshold 3")
    assert format_table(summarise(TRIALS, 30), 30) in out
    (tmp_path / "bad.json").write_text("{}")
    assert main(["--report", str(tmp_path / "bad.json")]) == 2
    assert "not a bench/rto.py --json file" in capsys.readouterr().err
