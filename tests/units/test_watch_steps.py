"""The watcher's pure steps: probes move trackers as the monitor's round does, a passive breach only
makes a HEALTHY region SUSPECT (and not again right after a probe cleared it), and fast confirm."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from drctl.models.health import ProbeStatus, RegionProbe, RegionState
from drctl.models.monitor import RegionTracker
from drctl.models.passive import PassiveSignal, PassiveVerdict
from drctl.models.rebalance_decision import passive_ttft_breaches, suspects_of
from drctl.models.watch import WatchInput, feed_passive, feed_probe, probe_period_s
from tests.support.builders import region_probe, watch_input

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _inp(**kw: object) -> WatchInput:
    return watch_input(**kw)


def _probe(status: ProbeStatus) -> RegionProbe:
    return region_probe(status, region="a", reason=status.value)


def _verdict(signal: PassiveSignal) -> PassiveVerdict:
    return PassiveVerdict(region="a", signal=signal, reason="gateway error rate 60% > 20%")


def test_probes_walk_the_monitors_state_machine_and_auth_changes_nothing() -> None:
    t, inp = RegionTracker(region="a"), _inp()
    assert not feed_probe(t, _probe(ProbeStatus.AUTH), T0, inp)
    assert (
        t.state is RegionState.HEALTHY and t.last_status is ProbeStatus.AUTH and t.consecutive_failures == 0
    )
    steps = [feed_probe(t, _probe(ProbeStatus.DOWN), T0 + timedelta(seconds=i), inp) for i in range(3)]
    assert steps == [True, False, True] and t.state is RegionState.UNHEALTHY
    assert t.first_failure_at == T0 and t.since == T0 + timedelta(seconds=2)
    assert feed_probe(t, _probe(ProbeStatus.HEALTHY), T0, inp) and t.state is RegionState.RECOVERING


def test_passive_breach_makes_only_a_healthy_region_suspect_and_counts_no_failed_check() -> None:
    t = RegionTracker(region="a")
    for quiet in (PassiveSignal.OK, PassiveSignal.NO_SIGNAL, PassiveSignal.MISSING):
        assert not feed_passive(t, _verdict(quiet), T0, None)
    assert feed_passive(t, _verdict(PassiveSignal.SUSPECT), T0, None)
    assert (t.state, t.since, t.first_failure_at, t.consecutive_failures) == (RegionState.SUSPECT, T0, T0, 0)
    assert t.last_reason.startswith("passive: gateway error rate")
    assert not feed_passive(t, _verdict(PassiveSignal.SUSPECT), T0, None)  # already SUSPECT
    down = RegionTracker(region="a", state=RegionState.UNHEALTHY)
    assert (
        not feed_passive(down, _verdict(PassiveSignal.SUSPECT), T0, None)
        and down.state is RegionState.UNHEALTHY
    )


def test_a_passive_ttft_breach_carries_its_floor_while_suspect_and_a_rebalance_may_act_on_it() -> None:
    t = RegionTracker(region="a")
    slow = PassiveVerdict(
        region="a", signal=PassiveSignal.SUSPECT, reason="replica TTFT p99 >= 2000 ms", ttft_floor_ms=2000.0
    )
    assert feed_passive(t, slow, T0, None) and t.passive_ttft_ms == 2000.0
    other = RegionTracker(region="b", state=RegionState.SUSPECT)  # SUSPECT by a failed probe: no floor
    lines = passive_ttft_breaches(suspects_of({"a": t, "b": other}), objective_ms=600.0)
    assert lines == {"a": "a TTFT p99 >= 2000 ms > objective 600 ms (passive signals)"}
    assert (
        passive_ttft_breaches(suspects_of({"a": t}), objective_ms=2500.0) == {}
    )  # within a looser objective
    # A failed probe keeps it SUSPECT with its floor; a passing one clears both.
    feed_probe(t, _probe(ProbeStatus.DOWN), T0, _inp())
    assert t.state is RegionState.SUSPECT and t.passive_ttft_ms == 2000.0
    feed_probe(t, _probe(ProbeStatus.HEALTHY), T0, _inp())
    assert t.state is RegionState.HEALTHY and t.passive_ttft_ms is None
    assert passive_ttft_breaches(suspects_of({"a": t}), objective_ms=600.0) == {}


def test_passive_breach_waits_out_the_quiet_time_a_clearing_probe_set() -> None:
    t = RegionTracker(region="a")
    quiet = T0 + timedelta(seconds=10)
    assert not feed_passive(t, _verdict(PassiveSignal.SUSPECT), quiet - timedelta(seconds=1), quiet)
    assert t.state is RegionState.HEALTHY
    assert feed_passive(t, _verdict(PassiveSignal.SUSPECT), quiet, quiet)


def test_fast_confirm_while_any_region_is_suspect() -> None:
    inp = _inp()
    calm = {"a": RegionTracker(region="a"), "b": RegionTracker(region="b", state=RegionState.UNHEALTHY)}
    assert probe_period_s(calm, inp) == 10.0
    calm["a"].state = RegionState.SUSPECT
    assert probe_period_s(calm, inp) == 1.0
    assert probe_period_s(calm, _inp(fast_confirm=False)) == 10.0


def test_a_breaching_region_is_confirmed_by_fewer_failed_probes_never_more_than_the_threshold() -> None:
    inp = _inp()
    t = RegionTracker(region="a")
    assert feed_passive(t, _verdict(PassiveSignal.SUSPECT), T0, None)
    # Users' requests and one failed probe agree: UNHEALTHY at once (health.passive.confirm_probes=1).
    assert feed_probe(t, _probe(ProbeStatus.DOWN), T0 + timedelta(seconds=1), inp, breach_threshold=1)
    assert t.state is RegionState.UNHEALTHY and t.consecutive_failures == 1
    # Without the breach the threshold stands; a breach threshold above it is capped by it.
    u, w = RegionTracker(region="a"), RegionTracker(region="a")
    assert [feed_probe(u, _probe(ProbeStatus.DOWN), T0, inp) for _ in range(2)] == [True, False]
    assert u.state is RegionState.SUSPECT
    assert [feed_probe(w, _probe(ProbeStatus.DOWN), T0, inp, breach_threshold=9) for _ in range(3)] == [
        True,
        False,
        True,
    ]
    assert w.state is RegionState.UNHEALTHY
