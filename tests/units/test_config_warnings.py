"""`drctl config validate` warnings that are pure functions of the config (drctl/config/warnings.py)."""

from __future__ import annotations

from drctl.config.schema import FleetConfig
from drctl.config.warnings import warnings
from tests.support.config import fleet_config_data, tuned


def _paths(cfg: FleetConfig) -> list[str]:
    return [w.path for w in warnings(cfg)]


def test_a_failback_sooner_than_a_drill_judges_its_failover_is_warned() -> None:
    cfg = FleetConfig.model_validate(fleet_config_data())
    assert "failback.stabilization_window_s" not in _paths(cfg)  # 30 s against 10 + 2
    short = tuned(cfg, "failback", stabilization_window_s=5.0)
    [w] = [w for w in warnings(short) if w.path == "failback.stabilization_window_s"]
    assert "shorter than objectives.slo.window_s 10 s + 2 s" in w.message and "at least 12 s" in w.message
    # A shorter objective window is enough too.
    ok = tuned(short, "objectives", slo=short.objectives.slo.model_copy(update={"window_s": 2.0}))
    assert "failback.stabilization_window_s" not in _paths(ok)
