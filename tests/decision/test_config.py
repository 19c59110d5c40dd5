"""DecisionConfig: its defaults and how it is built from a fleet's spec."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from drctl.config.quorum import QuorumConfig
from drctl.config.schema import load_config
from drctl.decision import DecisionConfig
from drctl.models.fleet_spec import FleetSpec

CONFIG = Path(__file__).resolve().parents[2] / "config" / "fleet.example.yaml"


@pytest.mark.parametrize(("interval", "window"), [(5.0, 30.0), (10.0, 30.0), (10.5, 31.5), (20.0, 60.0)])
def test_stability_window_defaults_to_three_ticks_at_least_30_s(interval: float, window: float) -> None:
    assert DecisionConfig(interval_s=interval).stability_window_s == window


def test_stability_window_given_stands() -> None:
    assert DecisionConfig(interval_s=20, stability_window_s=5).stability_window_s == 5
    assert DecisionConfig().stability_window_s == 30


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="stability_window"):
        DecisionConfig(stability_window=3)  # type: ignore[call-arg]


def spec(**changes: object) -> FleetSpec:
    return FleetSpec.from_config(load_config(CONFIG)).model_copy(update=changes)


def test_from_spec_copies_the_fleet_settings() -> None:
    s = spec()
    cfg = DecisionConfig.from_spec(s)
    assert (cfg.interval_s, cfg.failure_threshold, cfg.recovery_threshold) == (
        s.interval_s,
        s.failure_threshold,
        s.recovery_threshold,
    )
    assert (cfg.rto_target_s, cfg.mode, cfg.policy) == (s.rto_target_s, s.rebalance, s.policy)
    limits = s.rebalance_limits
    assert (cfg.breach_window_s, cfg.shed_step_interval_s, cfg.min_step_pct, cfg.target_utilisation) == (
        limits.breach_window_s,
        limits.shed_step_interval_s,
        limits.min_step_pct,
        limits.target_utilisation,
    )
    assert (cfg.slo_ttft_p99_ms, cfg.slo_error_rate) == (s.slo.ttft_p99_ms, s.slo.error_rate)


@pytest.mark.parametrize(("steps", "pct"), [(1, 100), (2, 50), (3, 34), (4, 25), (7, 15)])
def test_from_spec_return_step_from_the_failback_steps(steps: int, pct: int) -> None:
    assert DecisionConfig.from_spec(spec(failback_steps=steps)).return_step_pct == pct


def test_from_spec_windows_take_the_longest_of_the_settings() -> None:
    cfg = DecisionConfig.from_spec(spec(interval_s=20.0, stabilization_window_s=45.0))
    assert (cfg.stability_window_s, cfg.return_stable_s, cfg.backoff_s) == (60.0, 45.0, 60.0)
    cfg = DecisionConfig.from_spec(spec(interval_s=5.0, stabilization_window_s=10.0))
    assert (cfg.stability_window_s, cfg.return_stable_s, cfg.backoff_s) == (30.0, 30.0, 30.0)
    cfg = DecisionConfig.from_spec(spec(interval_s=5.0, stabilization_window_s=70.0))
    assert (cfg.stability_window_s, cfg.return_stable_s) == (70.0, 70.0)


@pytest.mark.parametrize(("regions", "quorum"), [(2, 2), (3, 2), (4, 3), (5, 3)])
def test_from_spec_quorum_is_a_majority_of_vantage_points(regions: int, quorum: int) -> None:
    s = spec()
    many = [s.regions[0].model_copy(update={"name": f"r{i}"}) for i in range(regions)]
    assert (
        DecisionConfig.from_spec(
            s.model_copy(update={"regions": many, "quorum": QuorumConfig(mode="majority")})
        ).quorum
        == quorum
    )
    assert (
        DecisionConfig.from_spec(
            s.model_copy(update={"regions": many, "quorum": QuorumConfig(mode="off")})
        ).quorum
        == 0
    )
