"""The monitor's live view: its `status` query merged with the running watcher's last heartbeat.

With `health.watcher` the monitor's own state changes only when the watcher returns (a region
changing state, or the checkpoint), so between returns its trackers and round count stand still
while the watcher goes on probing. The watcher's heartbeat (WatchProgress: trackers, rounds) is
readable by any client in the workflow's pending activities, so this view shows what the watcher
sees now. Temporal forwards an activity's heartbeats throttled, at most every 0.8 x its heartbeat
timeout (4 s for the watcher's 5 s), so the view trails the watcher by up to that much; a
heartbeat older than the heartbeat timeout means the watcher's worker is gone or stalled, and the
view says so (`heartbeat_stale`) rather than show its last trackers as current.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import WorkflowHandle

from drctl.models.monitor import MonitorStatus
from drctl.models.watch import WatchProgress

WATCH_ACTIVITY = "watch_regions"
# The watcher's heartbeat timeout (workflows/calls.py WATCH_HEARTBEAT): Temporal itself gives the
# attempt up after this long without a heartbeat, so a heartbeat this old describes nothing live.
STALE_AFTER_S = 5.0
CANCEL_REQUESTED = PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED


async def live_status(
    handle: WorkflowHandle[Any, Any], *, rpc_timeout: timedelta | None = None
) -> MonitorStatus:
    """The monitor's status with the watcher's live trackers and probe rounds merged in.

    Query first, describe second: a watcher that returns in between has already been replaced by
    one started from the newer state, so the heartbeat read is never older than the status.
    """
    st = await handle.query("status", result_type=MonitorStatus, rpc_timeout=rpc_timeout)
    desc = await handle.describe(rpc_timeout=rpc_timeout)
    for pending in desc.raw_description.pending_activities:
        # A watcher being cancelled (pause, spec update) runs on until its next forwarded heartbeat
        # brings the cancel; the monitor no longer takes its results, so neither does the view.
        if pending.activity_type.name != WATCH_ACTIVITY or pending.state == CANCEL_REQUESTED:
            continue
        st.watching = True
        if not pending.heartbeat_details.payloads:
            return st  # just started: nothing beyond the status yet
        (progress,) = await desc.data_converter.decode(pending.heartbeat_details.payloads, [WatchProgress])
        return merge(st, progress, pending.last_heartbeat_time.ToDatetime(tzinfo=UTC))
    return st


def merge(
    st: MonitorStatus, progress: WatchProgress, beat_at: datetime, now: datetime | None = None
) -> MonitorStatus:
    """`st` with the heartbeat's trackers and rounds; a stale heartbeat only adds its age, never its trackers."""
    age = ((now or datetime.now(UTC)) - beat_at).total_seconds()
    st.heartbeat_age_s = max(0.0, age)
    st.heartbeat_stale = age > STALE_AFTER_S
    if st.heartbeat_stale:
        return st
    # Regions a spec update removed meanwhile stay removed.
    st.regions = {name: progress.trackers.get(name, t) for name, t in st.regions.items()}
    st.probe_rounds += progress.rounds
    return st
