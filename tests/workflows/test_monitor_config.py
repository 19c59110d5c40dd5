"""Pure: a running monitor following a changed config (apply_spec), without Temporal."""

from __future__ import annotations

from datetime import UTC, datetime

from drctl.models.health import RegionState
from drctl.models.monitor import FailoverRecord, MonitorInput, MonitorState
from drctl.models.monitor_config import apply_spec, spec_problems
from tests.support.config import spec

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_weights_regions_thresholds_and_policy_follow_surviving_state_kept() -> None:
    old = spec([("w", 100, 2), ("e", 0, 1)])
    st = MonitorState.initial(MonitorInput(spec=old))
    st.trackers["w"].state, st.trackers["w"].consecutive_failures = RegionState.SUSPECT, 2
    st.failed_over = [FailoverRecord(workflow_id="f", source="e", target="w", started_at=T0)]
    new = spec([("w", 60, 2), ("x", 40, 2)]).model_copy(update={"failure_threshold": 5, "policy": "manual"})
    changes = apply_spec(st, new)
    assert st.spec.weights == {"w": 60, "x": 40}
    assert set(st.trackers) == {"w", "x"} and st.trackers["x"].state is RegionState.HEALTHY
    assert st.trackers["w"].state is RegionState.SUSPECT and st.trackers["w"].consecutive_failures == 2
    assert st.failed_over == []  # its source e is gone from the fleet
    assert st.policy == "manual" and st.spec.failure_threshold == 5
    assert "regions added: x" in changes and "regions removed: e" in changes
    assert "w.weight: 100 → 60" in changes and "failure_threshold: 3 → 5" in changes


def test_operator_policy_override_survives_an_unchanged_config() -> None:
    s = spec([("w", 60, 2), ("e", 40, 2)])
    st = MonitorState.initial(MonitorInput(spec=s))
    st.policy = "manual"  # `set_policy` at runtime
    assert apply_spec(st, s.model_copy()) == []
    assert st.policy == "manual"


def test_another_fleet_or_queue_is_refused() -> None:
    s = spec([("w", 60, 2), ("e", 40, 2)])
    assert spec_problems(s, s) == []
    assert "fleet" in spec_problems(s, s.model_copy(update={"fleet": "other"}))[0]
    assert "task_queue" in spec_problems(s, s.model_copy(update={"task_queue": "q2"}))[0]
