"""The monitor's live view: a fresh watcher heartbeat updates states and rounds; a stale one only shows its age."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from drctl.client.monitor_view import STALE_AFTER_S, merge
from drctl.models.health import ProbeStatus, RegionState
from drctl.models.monitor import MonitorStatus, RegionTracker
from drctl.models.watch import WatchProgress

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _status() -> MonitorStatus:
    return MonitorStatus(
        fleet="f",
        policy="manual",
        paused=False,
        alert=None,
        iteration=1,
        probe_rounds=7,
        regions={"w": RegionTracker(region="w"), "e": RegionTracker(region="e")},
    )


def _progress() -> WatchProgress:
    west = RegionTracker(
        region="w", state=RegionState.SUSPECT, last_status=ProbeStatus.DOWN, last_reason="passive: 5xx"
    )
    # "gone" was removed by a spec update after this watcher started: it must not come back.
    return WatchProgress(
        trackers={"w": west, "e": RegionTracker(region="e"), "gone": RegionTracker(region="gone")},
        rounds=4,
        started_at=NOW - timedelta(seconds=30),
    )


def test_a_fresh_heartbeat_brings_the_watchers_trackers_and_rounds() -> None:
    st = merge(_status(), _progress(), NOW - timedelta(seconds=3.9), now=NOW)
    assert st.probe_rounds == 11 and not st.heartbeat_stale and st.heartbeat_age_s == 3.9
    assert st.regions["w"].state is RegionState.SUSPECT and st.regions["w"].last_reason == "passive: 5xx"
    assert list(st.regions) == ["w", "e"]


def test_a_stale_heartbeat_is_shown_as_stale_not_as_current() -> None:
    st = merge(_status(), _progress(), NOW - timedelta(seconds=STALE_AFTER_S + 0.5), now=NOW)
    assert st.heartbeat_stale and st.heartbeat_age_s == STALE_AFTER_S + 0.5
    assert st.probe_rounds == 7 and st.regions["w"].state is RegionState.HEALTHY


def test_monitor_status_says_how_old_the_live_view_is() -> None:
    from drctl.cli.monitor import _probe_line

    fresh = merge(_status(), _progress(), NOW - timedelta(seconds=1), now=NOW)
    fresh.watching = True
    assert (
        _probe_line(fresh) == "11 probe rounds, monitor turn 1; live from the watcher's heartbeat 1.0 s ago"
    )
    stale = merge(_status(), _progress(), NOW - timedelta(seconds=12), now=NOW)
    stale.watching = True
    assert "STALE (12 s old)" in _probe_line(stale) and "not live" in _probe_line(stale)
