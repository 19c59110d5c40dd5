"""The monitor's models built from its state: the `status` answer and the watcher's input."""

from __future__ import annotations

from datetime import UTC, datetime

from drctl.models.monitor import FailoverRecord, MonitorInput, MonitorState, MonitorStatus
from drctl.models.watch import PROBE_SETTINGS, WatchInput
from tests.support.config import spec

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _state() -> MonitorState:
    s = MonitorState.initial(MonitorInput(spec=spec([("a", 60, 2), ("b", 40, 2)]), max_iterations=7))
    rec = FailoverRecord(workflow_id="failover/t", source="a", target="b", started_at=AT, status="succeeded")
    s.paused, s.alert, s.probe_rounds, s.total_iterations, s.iteration = True, "NO_QUORUM", 12, 9, 2
    s.failed_over, s.last_failover, s.last_failback = [rec], rec, "succeeded at noon"
    s.unresolved, s.avoid_targets = {"b": "not in this worker's config"}, {"b": AT}
    return s


def test_status_is_the_states_view() -> None:
    s = _state()
    running = FailoverRecord(workflow_id="failover/t", source="b", target="a", started_at=AT)
    st = MonitorStatus.of(s, running)
    assert (st.fleet, st.policy, st.paused, st.alert) == ("t", "automatic", True, "NO_QUORUM")
    assert (st.iteration, st.probe_rounds) == (9, 12)  # the turns over every run, not this run's
    assert st.regions == s.trackers and st.weights == {"a": 60, "b": 40}
    assert st.active_failover == running and st.failed_over == s.failed_over
    assert (st.last_failover, st.last_failback) == (s.last_failover, "succeeded at noon")
    assert st.unresolved == s.unresolved and st.avoid_targets == {"b": AT} and st.votes == {}
    assert MonitorStatus.of(s, None).active_failover is None


def test_watch_input_carries_the_specs_probe_settings_and_the_resume_state() -> None:
    fleet = spec([("a", 60, 2), ("b", 40, 2)], watcher_checkpoint_s=300)
    s = _state()
    inp = WatchInput.for_spec(
        fleet, trackers=s.trackers, unresolved=s.unresolved, refused=["a"], quiet_until={}
    )
    assert inp.regions == ["a", "b"] and inp.return_after_s == 300
    assert {k: getattr(inp, k) for k in PROBE_SETTINGS} == {k: getattr(fleet, k) for k in PROBE_SETTINGS}
    assert (inp.fast_confirm_interval_s, inp.failure_threshold) == (1, 3)
    assert inp.trackers == s.trackers and inp.unresolved == s.unresolved and inp.refused == ["a"]


def test_the_quorum_collaborator_reads_and_writes_only_the_run_it_is_handed() -> None:
    """MonitorQuorum alone, outside any workflow: the votes it keeps and the lines it renders."""
    from drctl.models.health import RegionState
    from drctl.models.quorum import NO_QUORUM, QuorumVote
    from workflows.monitor_quorum import MonitorQuorum
    from workflows.monitor_run import MonitorRun

    async def never(source: str, target: str) -> None:
        raise AssertionError("no failover without a vote")

    s = _state()
    s.failed_over = []
    run = MonitorRun(s)
    quorum = MonitorQuorum(run, never)

    def vote(verdict: str) -> QuorumVote:
        views = {"main": "down: 503", "b": "healthy"}
        return QuorumVote(at=AT, verdict=verdict, views=views, down=1, voters=2, backoff_s=60)  # type: ignore[arg-type]

    s.trackers["a"].state = RegionState.UNHEALTHY
    s.votes = {"a": vote("no_quorum"), "b": vote("no_quorum")}
    assert quorum.forget_votes() == NO_QUORUM  # a still UNHEALTHY without a quorum
    assert set(s.votes) == {"a"}  # b is HEALTHY: its next fall votes afresh
    assert quorum.vote_due() == [s.votes["a"].retry_at]
    assert quorum.lines()[1] == "| a | 12:00:00 | 1/2 see it down (no_quorum) | main: down: 503; b: healthy |"
    s.trackers["a"].state = RegionState.RECOVERING
    assert quorum.forget_votes() is None and s.votes == {} and quorum.lines() == []
    assert run.child is None and not run.poke  # nothing started, nothing woken
