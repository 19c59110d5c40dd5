"""Pure logic of the monitor and failover plans: state machine, target choice, weights, capacity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from drctl.models.failover import failback_plan, probe_passes, shift_weights
from drctl.models.health import ProbeStatus, RegionProbe, RegionState, TargetProbe
from drctl.models.monitor import RegionTracker, pick_target

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def feed(t: RegionTracker, checks: str, fail_th: int = 3, rec_th: int = 3) -> list[RegionState]:
    """Feed '+' (pass) / '-' (fail) checks one second apart; return the state after each."""
    out = []
    for i, c in enumerate(checks):
        t.observe(c == "+", T0 + timedelta(seconds=i), fail_th, rec_th)
        out.append(t.state)
    return out


H, S, U, R = RegionState.HEALTHY, RegionState.SUSPECT, RegionState.UNHEALTHY, RegionState.RECOVERING


def test_threshold_consecutive_failures_make_unhealthy() -> None:
    t = RegionTracker(region="a")
    assert feed(t, "---") == [S, S, U]
    assert t.first_failure_at == T0


def test_single_blip_returns_to_healthy_without_hysteresis() -> None:
    t = RegionTracker(region="a")
    assert feed(t, "-+-+-+") == [S, H, S, H, S, H]


def test_flapping_never_reaches_unhealthy() -> None:
    # A replica dying and being replaced reads as an occasional failed check, never 3 in a row.
    t = RegionTracker(region="a")
    assert U not in feed(t, "+--+--+-+--+")


def test_recovery_needs_recovery_threshold_good_checks() -> None:
    t = RegionTracker(region="a")
    assert feed(t, "---++++", rec_th=3) == [S, S, U, R, R, H, H]
    assert t.first_failure_at is None


def test_relapse_while_recovering_goes_back_to_unhealthy() -> None:
    t = RegionTracker(region="a")
    assert feed(t, "---++-")[-1] is U
    assert feed(t, "++")[-1] is R  # recovery starts over


def test_threshold_one_is_immediate() -> None:
    t = RegionTracker(region="a")
    assert feed(t, "-", fail_th=1) == [U]


def test_pick_target_prefers_healthy_then_weight() -> None:
    trackers = {n: RegionTracker(region=n) for n in ("a", "b", "c")}
    trackers["a"].state = U
    trackers["b"].state = R
    assert pick_target(trackers, "a", {"a": 60, "b": 40, "c": 10}) == "c"
    trackers["c"].state = S
    assert pick_target(trackers, "a", {"a": 60, "b": 40, "c": 10}) == "b"
    trackers["b"].state = U
    assert pick_target(trackers, "a", {"a": 60, "b": 40, "c": 10}) is None


def test_pick_target_skips_excluded_regions() -> None:
    # A target whose failover just failed (dead worker) or that the worker cannot resolve is skipped.
    trackers = {n: RegionTracker(region=n) for n in ("a", "b", "c")}
    trackers["a"].state = U
    assert pick_target(trackers, "a", {"a": 50, "b": 30, "c": 20}) == "b"
    assert pick_target(trackers, "a", {"a": 50, "b": 30, "c": 20}, exclude={"b"}) == "c"
    assert pick_target(trackers, "a", {"a": 50, "b": 30, "c": 20}, exclude={"b", "c"}) is None


def test_shift_weights_moves_the_share_and_never_zeroes_all() -> None:
    assert shift_weights({"w": 60, "e": 40}, "w", "e") == {"w": 0, "e": 100}
    assert shift_weights({"w": 0, "e": 0}, "w", "e") == {"w": 0, "e": 1}
    assert shift_weights({"a": 50, "b": 30, "c": 20}, "a", "c") == {"a": 0, "b": 30, "c": 70}


def test_failback_plan_steps_end_exactly_at_configured() -> None:
    plan = failback_plan({"w": 0, "e": 100}, {"w": 60, "e": 40}, 3)
    assert plan == [{"w": 20, "e": 80}, {"w": 40, "e": 60}, {"w": 60, "e": 40}]
    assert all(sum(s.values()) > 0 for s in plan)
    assert failback_plan({"w": 60, "e": 40}, {"w": 60, "e": 40}, 3) == [{"w": 60, "e": 40}]


def _probe(status: ProbeStatus, gateway: ProbeStatus | None = None) -> RegionProbe:
    gw = TargetProbe(target="gateway", url="u", status=gateway or status)
    return RegionProbe(region="a", status=status, gateway=gw)


def test_degraded_counts_as_failed_only_when_configured_and_user_visible() -> None:
    assert probe_passes(_probe(ProbeStatus.HEALTHY), True)
    assert not probe_passes(_probe(ProbeStatus.DOWN), False)
    assert not probe_passes(_probe(ProbeStatus.DEGRADED), True)
    assert probe_passes(_probe(ProbeStatus.DEGRADED), False)
    # One replica down behind a gateway that serves fine: a flapping replica, not a failing region.
    assert probe_passes(_probe(ProbeStatus.DEGRADED, gateway=ProbeStatus.HEALTHY), True)


def test_monitor_tries_the_next_healthy_region_before_retrying_a_failed_one() -> None:
    from drctl.models.monitor import MonitorInput, MonitorState, choose_target
    from tests.support.config import spec

    st = MonitorState.initial(MonitorInput(spec=spec([("a", 50, 5), ("b", 30, 3), ("c", 20, 2)])))
    st.trackers["a"].state = U
    assert choose_target(st, "a", T0) == "b"
    st.avoid_targets["b"] = T0 + timedelta(seconds=300)  # the failover to b failed (its worker is dead)
    assert choose_target(st, "a", T0) == "c"
    st.avoid_targets["c"] = T0 + timedelta(seconds=300)
    assert choose_target(st, "a", T0) == "b"  # nothing else left: retry rather than give up
    st.unresolved = {"b": "worker has no region b"}
    assert choose_target(st, "a", T0) == "c"  # never a region the worker cannot reach
    assert choose_target(st, "a", T0 + timedelta(seconds=301)) == "c" and st.avoid_targets == {}
