"""Edges of the decision core the rule tests leave open: settings copied from a fleet's spec when
they differ from the defaults, the memory's back-off, and the invariants' exact verdicts."""

from __future__ import annotations

from datetime import timedelta

from drctl.decision import DecisionConfig, DecisionMemory, RegionMemory
from drctl.decision.memory import note_apply_failed
from tests.decision.facts import T0
from tests.decision.test_config import spec


def test_from_spec_copies_every_setting_that_differs_from_the_defaults() -> None:
    s = spec()
    limits = s.rebalance_limits.model_copy(
        update={
            "breach_window_s": 7.0,
            "shed_step_interval_s": 11.0,
            "min_step_pct": 9,
            "target_utilisation": 0.6,
        }
    )
    slo = s.slo.model_copy(update={"ttft_p99_ms": 450.0, "error_rate": 0.05})
    cfg = DecisionConfig.from_spec(
        spec(
            interval_s=4.0,
            failure_threshold=5,
            recovery_threshold=7,
            rto_target_s=90.0,
            rebalance="advise",
            policy="manual",
            rebalance_limits=limits,
            slo=slo,
        )
    )
    assert cfg.interval_s == 4.0
    assert cfg.failure_threshold == 5
    assert cfg.recovery_threshold == 7
    assert cfg.rto_target_s == 90.0
    assert cfg.mode == "advise"
    assert cfg.policy == "manual"
    assert cfg.breach_window_s == 7.0
    assert cfg.shed_step_interval_s == 11.0
    assert cfg.min_step_pct == 9
    assert cfg.target_utilisation == 0.6
    assert cfg.slo_ttft_p99_ms == 450.0
    assert cfg.slo_error_rate == 0.05


def test_note_apply_failed_sets_the_back_off_and_shares_nothing_with_the_old_memory() -> None:
    old = DecisionMemory(regions={"a": RegionMemory(consecutive_failures=2)}, last_applied={"a": 100})
    new = note_apply_failed(old, T0, 45.0)
    assert new.not_before == T0 + timedelta(seconds=45)
    assert old.not_before is None
    assert new.regions == old.regions
    assert new.last_applied == old.last_applied
    # A deep copy: the caller may change the new memory without touching the old one.
    assert new.regions is not old.regions
    assert new.regions["a"] is not old.regions["a"]
    assert new.last_applied is not old.last_applied
