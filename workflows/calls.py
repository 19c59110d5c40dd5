"""Typed activity calls: one function per activity, holding its timeouts and retry policy.

Workflows write `await calls.scale_deployment(ScaleInput(...), queue=q, summary=...)` and get a
`DeploymentStatus` back, never `workflow.execute_activity("scale_deployment", ..., result_type=...)`.
The string inside each stub is the activity type recorded in every history: never rename it.
The same activity gets the same policy at every call site; what varies with the input (a rollout's
timeout, a verify deadline) is a parameter.

`queue` is the task queue (a region's, for anything that touches that region); None means the
workflow's own queue. Every region-queue call, and the quick main-queue reads, wait at most
QUEUE_WAIT_S for a worker (schedule-to-start); `NO_QUEUE_WAIT` marks the calls bounded otherwise.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from drctl.models import drill as dr
    from drctl.models import upgrade as up
    from drctl.models.activity_io import (
        Capacity,
        DeploymentStatus,
        ProbeBatch,
        ProbeRequest,
        RegionRequest,
        ScaleInput,
        SetWeightsInput,
        VerifyInput,
        VerifyResult,
        WaitRolloutInput,
        Weights,
    )
    from drctl.models.analysis import AnalysisRequest, AnalysisResult
    from drctl.models.backup import (
        BackupInfo,
        BackupList,
        BackupName,
        BackupRequest,
        LastBackup,
        RestoreRequest,
        ScheduleInfo,
        ScheduleList,
    )
    from drctl.models.capacity_sample import CapacityReadInput, CapacityReadResult
    from drctl.models.capacity_watch import CapacityWatchInput, CapacityWatchResult
    from drctl.models.health import RegionProbe
    from drctl.models.lock import AliveInput, AliveResult, LockGrant, LockRequest
    from drctl.models.notify import DeliverInput, Delivery
    from drctl.models.outcome import OutcomeInput
    from drctl.models.reads import (
        DrillHistory,
        DrillHistoryRequest,
        DrillReportRequest,
        DrillReportText,
        LagList,
        ScheduleWrite,
    )
    from drctl.models.release import Release
    from drctl.models.rpo import (
        ArtifactsInput,
        ArtifactsResult,
        ReplicaPair,
        ReplicationRun,
        RpoCheck,
        RpoCheckInput,
    )
    from drctl.models.safe_text import SUMMARY_CHARS, safe_text
    from drctl.models.slo import SloWatchInput, SloWatchResult
    from drctl.models.tier_watch import TierWatchInput, TierWatchResult
    from drctl.models.traffic import PropagationInput, PropagationResult, WeightsApplied
    from drctl.models.watch import WatchInput, WatchResult

T = TypeVar("T")
A = TypeVar("A")
A_in = TypeVar("A_in", contravariant=True)
R_out = TypeVar("R_out", covariant=True)

# --- retry policies, each with the failure it is for ---------------------------------------------


def _s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def _backoff(first_s: float, max_s: float, attempts: int = 0) -> RetryPolicy:
    """Doubling waits from `first_s` up to `max_s`; `attempts` 0 is unlimited (schedule_to_close bounds it)."""
    return RetryPolicy(
        initial_interval=_s(first_s),
        backoff_coefficient=2.0,
        maximum_interval=_s(max_s),
        maximum_attempts=attempts,
    )


# Fast, idempotent calls (read weights, probe): a failover is racing its RTO, so a transient socket
# error is retried quickly, a handful of times, and must not end it.
FAST_RETRY = _backoff(0.2, 2, 5)
# Platform calls (Kubernetes API, Velero, rclone, the region gateway): conflicts and throttling heal
# within seconds. Also what resumes a heartbeating wait on another worker after a worker restart.
PLATFORM_RETRY = _backoff(1, 10, 6)
# The watcher: a worker restart (graceful or a crash seen by the heartbeat) is retried at once on
# the next worker, resuming from the heartbeat; a watcher failing over and over surfaces to the monitor.
WATCH_RETRY = _backoff(0.2, 2, 10)
# Called once on purpose: the workflow repeats it itself, or a second attempt would do harm.
NO_RETRY = RetryPolicy(maximum_attempts=1)
# Route 53 Throttling / PriorRequestNotComplete heal within seconds; back off rather than hammer the
# API (5 requests/s per account). Worst case ~22 s of backoff before giving up.
APPLY_RETRY = _backoff(0.5, 5, 8)
# A propagation wait retries only when its worker died (heartbeat timeout); schedule_to_close bounds it.
WAIT_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
# The SLO watch reads servers for a bounded time; a lost worker is retried within the bound it was given.
SLO_RETRY = _backoff(1, 5, 3)
# Verify attempts are repeated by the workflow; this only replaces a lost attempt, until the deadline.
# A bad token (AuthConfigError) is not retried.
VERIFY_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    backoff_coefficient=1.0,
    non_retryable_error_types=["AuthConfigError"],
)
# Acquire is idempotent (same update id, same holder), so a lost attempt is simply retried.
ACQUIRE_RETRY = _backoff(0.2, 2, 8)
# Analysis sends its own bounded traffic; a worker lost mid-window is retried a couple of times.
ANALYSIS_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3)
# S3 can be down or throttling (503 SlowDown) for minutes: keep retrying, with backoff (see REPORT_UPLOAD_WINDOW).
REPORT_UPLOAD_RETRY = _backoff(1, 60)
REPORT_UPLOAD_WINDOW = timedelta(minutes=15)
# Clearing drill faults is idempotent, and a fault left behind hurts users: retry for a while.
CLEAR_RETRY = _backoff(1, 10, 10)
# Observing a failover is a read; a worker lost mid-watch is retried.
OBSERVE_RETRY = RetryPolicy(maximum_attempts=3)
# Metrics must not hold up or fail the operation: a few quick tries, then the caller logs a warning.
METRICS_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=3)
# rclone retries inside a run; a run that still fails is retried at the next interval, so Temporal
# only covers a lost worker or a transient start failure.
RUN_RETRY = _backoff(2, 10, 3)
# Backoff between webhook delivery attempts; the total is bounded by schedule_to_close (retry_for_s).
DELIVERY_RETRY = _backoff(1, 30)

# How long any activity may wait in its task queue for a worker. A region's worker that is dead (or
# a queue nobody serves) must surface as an error naming the queue, never as an operation that waits
# forever: Temporal retries nothing on a schedule-to-start timeout, so this is the whole wait. Far
# above a live worker's pickup latency (milliseconds), and short enough that a failover to a region
# without a worker fails, and the monitor tries another region, well inside 90 s.
QUEUE_WAIT_S = 30.0
# A rollout, backup or rclone wait heartbeats every few seconds: a killed worker shows within this.
WAIT_HEARTBEAT = timedelta(seconds=10)
WATCH_HEARTBEAT = timedelta(seconds=5)  # the watcher heartbeats every second
VELERO_HEARTBEAT = timedelta(seconds=30)
ROLLOUT_ATTEMPT_S = 3600.0  # a rollout wait's bound: progressDeadlineSeconds (600 by default) plus loads
VELERO_S = 900.0  # Velero itself is the slow part; the heartbeat catches a lost worker long before
# Main-queue calls served by the workers that run the workflow itself, each bounded by its own
# schedule-to-close or attempts; and verify, bounded by its deadline (schedule_to_close).
NO_QUEUE_WAIT = None


@dataclass(frozen=True)
class _Policy:
    """How one kind of call is retried and bounded: the same at every call site."""

    retry: RetryPolicy
    heartbeat: timedelta | None = None
    queue_wait_s: float | None = QUEUE_WAIT_S


FAST = _Policy(FAST_RETRY)
APPLY = _Policy(APPLY_RETRY)
PROPAGATION = _Policy(WAIT_RETRY, WAIT_HEARTBEAT)
VERIFY = _Policy(VERIFY_RETRY, _s(5), NO_QUEUE_WAIT)
ONCE = _Policy(NO_RETRY)
SLO_WATCH = _Policy(SLO_RETRY, _s(10))
PLATFORM = _Policy(PLATFORM_RETRY)
ROLLOUT = _Policy(PLATFORM_RETRY, WAIT_HEARTBEAT)
VELERO = _Policy(PLATFORM_RETRY, VELERO_HEARTBEAT)
SLOW_PLATFORM = _Policy(PLATFORM_RETRY, _s(30))  # warm-up requests, rclone copies
ANALYSIS = _Policy(ANALYSIS_RETRY, _s(30))
# A replica region's worker may be restarting: a run waits longer for it than an operation does.
REPLICATION = _Policy(RUN_RETRY, _s(30), queue_wait_s=60)
ACQUIRE = _Policy(ACQUIRE_RETRY, queue_wait_s=NO_QUEUE_WAIT)
METRICS = _Policy(METRICS_RETRY, queue_wait_s=NO_QUEUE_WAIT)
DELIVERY = _Policy(DELIVERY_RETRY, queue_wait_s=NO_QUEUE_WAIT)
OBSERVE = _Policy(OBSERVE_RETRY, _s(15), NO_QUEUE_WAIT)
CLEAR = _Policy(CLEAR_RETRY, queue_wait_s=NO_QUEUE_WAIT)
REPORT_UPLOAD = _Policy(REPORT_UPLOAD_RETRY, queue_wait_s=NO_QUEUE_WAIT)


def shown_summary(summary: str) -> str:
    """An activity or child workflow summary as the UI may show it: escaped, one line, bounded."""
    return safe_text(summary, limit=SUMMARY_CHARS)


async def _call(
    name: str,
    arg: Any,
    result: type[T] | None,
    summary: str,
    queue: str | None,
    seconds: float,
    how: _Policy,
    **more: Any,
) -> T:
    """Execute activity `name` for at most `seconds` an attempt; `more` holds the bounds that vary
    with the input (schedule_to_close_timeout, a heartbeat_timeout or schedule_to_start_timeout of its own)."""
    wait = None if how.queue_wait_s is None else _s(how.queue_wait_s)
    options: dict[str, Any] = {"heartbeat_timeout": how.heartbeat, "schedule_to_start_timeout": wait, **more}
    return await workflow.execute_activity(  # type: ignore[no-any-return]
        name,
        args=[] if arg is None else [arg],
        result_type=result,
        summary=shown_summary(summary),
        task_queue=queue,
        start_to_close_timeout=_s(seconds),
        retry_policy=how.retry,
        **options,
    )


# --- traffic and health --------------------------------------------------------------------------


async def get_global_weights(*, queue: str | None = None, summary: str = "read global weights") -> Weights:
    return await _call("get_global_weights", None, Weights, summary, queue, 10, FAST)


async def set_global_weights(inp: SetWeightsInput, *, queue: str, summary: str) -> WeightsApplied:
    # Returns at once with the change id: a slow propagation never re-sends the change.
    return await _call("set_global_weights", inp, WeightsApplied, summary, queue, 10, APPLY)


async def wait_global_propagation(inp: PropagationInput, *, queue: str, summary: str) -> PropagationResult:
    close = _s(inp.timeout_s * 2 + 60)
    return await _call(
        "wait_global_propagation",
        inp,
        PropagationResult,
        summary,
        queue,
        inp.timeout_s + 30,
        PROPAGATION,
        schedule_to_close_timeout=close,
    )


async def verify_global(inp: VerifyInput, *, queue: str, deadline_s: float, summary: str) -> VerifyResult:
    """One verification attempt; the server retries a lost one until `deadline_s` from now."""
    close = _s(deadline_s + 5)
    return await _call(
        "verify_global",
        inp,
        VerifyResult,
        summary,
        queue,
        inp.timeout_s + 5,
        VERIFY,
        schedule_to_close_timeout=close,
    )


async def watch_slo(inp: SloWatchInput, *, queue: str, bound_s: float, summary: str) -> SloWatchResult:
    """Until the target meets the objective, held; the operation never waits on it past `bound_s`."""
    return await _call(
        "watch_slo",
        inp,
        SloWatchResult,
        summary,
        queue,
        bound_s,
        SLO_WATCH,
        schedule_to_close_timeout=_s(bound_s + 5),
    )


def probe_attempt_s(probe_timeout_s: float) -> float:
    """start_to_close of one probe attempt: every request of the probe may take its timeout."""
    return probe_timeout_s * 4 + 5


async def probe_region(inp: RegionRequest, *, probe_timeout_s: float, summary: str) -> RegionProbe:
    return await _call(
        "probe_region", inp, RegionProbe, summary, None, probe_attempt_s(probe_timeout_s), FAST
    )


async def probe_regions(inp: ProbeRequest, *, probe_timeout_s: float, summary: str) -> ProbeBatch:
    return await _call(
        "probe_regions", inp, ProbeBatch, summary, None, probe_attempt_s(probe_timeout_s), FAST
    )


async def probe_from(
    inp: ProbeRequest, *, queue: str, probe_timeout_s: float, vantage_timeout_s: float, summary: str
) -> ProbeBatch:
    """A quorum vote: another region's worker probes. Once: an unanswered vote is a missing vote,
    and waiting vantage_timeout_s for a worker, not QUEUE_WAIT_S, keeps a dead one from holding up a failover."""
    seconds = probe_attempt_s(probe_timeout_s)
    wait = _s(vantage_timeout_s)
    return await _call(
        "probe_regions", inp, ProbeBatch, summary, queue, seconds, ONCE, schedule_to_start_timeout=wait
    )


def start_watch(inp: WatchInput, *, summary: str) -> workflow.ActivityHandle[WatchResult]:
    """Started, not awaited: the monitor cancels it on pause or a spec update. A lost worker is
    noticed within WATCH_HEARTBEAT and the next attempt resumes from the last heartbeat."""
    return workflow.start_activity(
        "watch_regions",
        inp,
        result_type=WatchResult,
        summary=shown_summary(summary),
        start_to_close_timeout=_s(inp.return_after_s + probe_attempt_s(inp.probe_timeout_s) * 2 + 30),
        heartbeat_timeout=WATCH_HEARTBEAT,
        retry_policy=WATCH_RETRY,
    )


# The tier watch heartbeats every second between reads; one read of a throttled Route 53 may take
# longer, so a lost worker is noticed within this.
TIER_WATCH_HEARTBEAT = timedelta(seconds=30)


def start_tier_watch(inp: TierWatchInput, *, summary: str) -> workflow.ActivityHandle[TierWatchResult]:
    """Started, not awaited: the monitor cancels it before continue-as-new."""
    return workflow.start_activity(
        "watch_global_tier",
        inp,
        result_type=TierWatchResult,
        summary=shown_summary(summary),
        start_to_close_timeout=_s(inp.return_after_s + inp.interval_s + 120),
        heartbeat_timeout=TIER_WATCH_HEARTBEAT,
        retry_policy=WATCH_RETRY,
    )


def start_capacity_watch(
    inp: CapacityWatchInput, *, queue: str, probe_timeout_s: float, summary: str
) -> workflow.ActivityHandle[CapacityWatchResult]:
    """The rebalance's quiet wait on a region's queue; started, not awaited. Called once: when it
    fails (a lost worker, a dead queue), the rebalance goes back to its ticks, which read themselves."""
    return workflow.start_activity(
        "watch_capacity",
        inp,
        result_type=CapacityWatchResult,
        summary=shown_summary(summary),
        task_queue=queue,
        # A region whose worker does not take it within a tick: the ticks read it (and say so).
        schedule_to_start_timeout=_s(inp.interval_s),
        start_to_close_timeout=_s(inp.return_after_s + inp.interval_s + capacity_read_s(probe_timeout_s)),
        heartbeat_timeout=WATCH_HEARTBEAT,
        retry_policy=NO_RETRY,
    )


def capacity_read_s(probe_timeout_s: float) -> float:
    """start_to_close of one capacity reading: the EndpointSlice list and the Deployment reads (15 s
    each at most, run side by side with the /metrics reads, each within the probe timeout)."""
    return max(15.0, probe_timeout_s) * 2 + 5


async def read_capacity_signals(
    inp: CapacityReadInput,
    *,
    queue: str,
    probe_timeout_s: float,
    queue_wait_s: float = QUEUE_WAIT_S,
    summary: str,
) -> CapacityReadResult:
    """A region's capacity reading on its own queue. A read, retried quickly (FAST); a caller that
    reads every few seconds passes a queue_wait_s of about its tick, so a dead worker costs one tick."""
    return await _call(
        "read_capacity_signals",
        inp,
        CapacityReadResult,
        summary,
        queue,
        capacity_read_s(probe_timeout_s),
        FAST,
        schedule_to_start_timeout=_s(queue_wait_s),
    )


# --- platform (a region's cluster) ---------------------------------------------------------------


class RegionCall(Protocol[A_in, R_out]):
    def __call__(self, inp: A_in, *, queue: str, summary: str) -> Awaitable[R_out]: ...


def _platform(name: str, arg: type[A], result: type[T]) -> RegionCall[A, T]:
    """A quick call to a region's API: conflicts and throttling retried (PLATFORM_RETRY), 30 s each.

    `arg` only types the stub's input; the activity checks it.
    """

    async def call(inp: A, *, queue: str, summary: str) -> T:
        return await _call(name, inp, result, summary, queue, 30, PLATFORM)

    return call


get_capacity = _platform("get_capacity", RegionRequest, Capacity)
scale_deployment = _platform("scale_deployment", ScaleInput, DeploymentStatus)
deploy_track = _platform("deploy_track", up.TrackDeployRequest, up.RegionTrackRequest)
remove_track = _platform("remove_track", up.RegionTrackRequest, bool)
get_stable_release = _platform("get_stable_release", RegionRequest, up.Release)
set_stable_release = _platform("set_stable_release", up.PromoteRequest, up.Release)
set_track_weights = _platform("set_track_weights", up.TrackWeightsRequest, up.TrackWeightsResult)


async def wait_rollout(inp: WaitRolloutInput, *, queue: str, summary: str) -> DeploymentStatus:
    # Retried: a worker killed mid-wait is noticed by the heartbeat timeout and the wait resumes on
    # another worker. RolloutTimeout itself is non-retryable, so a real timeout still ends it.
    # An attempt may outlast timeout_s: the activity follows the Deployment's progressDeadlineSeconds
    # (plus the model's load time), up to this bound less a wrap-up; the heartbeat catches a lost worker.
    attempt_s = max(inp.timeout_s, ROLLOUT_ATTEMPT_S) + 30
    return await _call("wait_rollout", inp, DeploymentStatus, summary, queue, attempt_s, ROLLOUT)


async def create_backup(inp: BackupRequest, *, queue: str, summary: str) -> BackupInfo:
    # Idempotent by name, so a retry re-attaches to the running backup.
    return await _call("create_backup", inp, BackupInfo, summary, queue, VELERO_S, VELERO)


async def wait_backup_synced(inp: BackupName, *, queue: str, summary: str) -> BackupInfo:
    # Bounded by backup.sync_timeout_s inside the activity; VELERO_S only catches a lost worker.
    return await _call("wait_backup_synced", inp, BackupInfo, summary, queue, VELERO_S, VELERO)


async def restore_backup(inp: RestoreRequest, *, queue: str, summary: str) -> BackupInfo:
    return await _call("restore_backup", inp, BackupInfo, summary, queue, VELERO_S, VELERO)


async def warm_up(inp: up.WarmupRequest, *, queue: str, summary: str) -> up.WarmupResult:
    return await _call("warm_up", inp, up.WarmupResult, summary, queue, 120, SLOW_PLATFORM)


async def analyze_tracks(inp: AnalysisRequest, *, queue: str, summary: str) -> AnalysisResult:
    return await _call("analyze_tracks", inp, AnalysisResult, summary, queue, inp.window_s + 60, ANALYSIS)


# --- data ----------------------------------------------------------------------------------------


async def copy_artifacts(inp: ArtifactsInput, *, queue: str, summary: str) -> ArtifactsResult:
    return await _call("copy_artifacts", inp, ArtifactsResult, summary, queue, VELERO_S, SLOW_PLATFORM)


async def check_rpo(inp: RpoCheckInput, *, queue: str, bound_s: float, summary: str) -> RpoCheck:
    # One attempt: the failover is racing its RTO, and an unmeasurable lag is itself the answer.
    bound = _s(bound_s)
    return await _call("check_rpo", inp, RpoCheck, summary, queue, bound_s, ONCE, heartbeat_timeout=bound)


async def replicate_pair(pair: ReplicaPair, *, queue: str, timeout_s: float, summary: str) -> ReplicationRun:
    return await _call(
        "replicate_pair", pair, ReplicationRun, summary, queue, timeout_s * 2 + 30, REPLICATION
    )


# --- fleet lock, metrics, notifications ----------------------------------------------------------


async def acquire_fleet(inp: LockRequest, *, summary: str) -> LockGrant:
    return await _call("acquire_fleet", inp, LockGrant, summary, None, 30, ACQUIRE)


async def lock_holders_closed(inp: AliveInput, *, summary: str) -> AliveResult:
    return await _call("lock_holders_closed", inp, AliveResult, summary, None, 10, FAST)


async def record_outcome(inp: OutcomeInput, *, summary: str) -> None:
    await _call("record_outcome", inp, None, summary, None, 10, METRICS)


async def notify_webhook(inp: DeliverInput, *, summary: str) -> Delivery:
    hook = inp.webhook
    close = _s(hook.retry_for_s)
    return await _call(
        "notify_webhook",
        inp,
        Delivery,
        summary,
        None,
        hook.timeout_s + 5,
        DELIVERY,
        schedule_to_close_timeout=close,
    )


# --- drill ---------------------------------------------------------------------------------------


async def drill_monitor_check(inp: dr.MonitorCheckInput, *, summary: str) -> dr.MonitorCheck:
    return await _call("drill_monitor_check", inp, dr.MonitorCheck, summary, None, 20, FAST)


async def drill_observe(inp: dr.ObserveInput, *, summary: str) -> dr.Observation:
    return await _call("drill_observe", inp, dr.Observation, summary, None, inp.timeout_s + 30, OBSERVE)


async def drill_clear_faults(inp: dr.ClearFaultsInput, *, summary: str) -> dr.ClearFaultsResult:
    return await _call("drill_clear_faults", inp, dr.ClearFaultsResult, summary, None, 60, CLEAR)


async def drill_store_report(
    report: dr.DrillReport, *, give_up_after: timedelta, summary: str
) -> dr.ReportKey:
    return await _call(
        "drill_store_report",
        report,
        dr.ReportKey,
        summary,
        None,
        30,
        REPORT_UPLOAD,
        schedule_to_close_timeout=give_up_after,
    )


def start_drill_experiment(
    inp: dr.ExperimentRunInput, *, grace_s: float, summary: str
) -> workflow.ActivityHandle[dr.ExperimentOutcome]:
    """Started, not awaited: the drill's abort cancels it, and the cancel waits for its rollbacks."""
    return workflow.start_activity(
        "drill_run_experiment",
        inp,
        result_type=dr.ExperimentOutcome,
        summary=shown_summary(summary),
        start_to_close_timeout=_s(inp.timeout_s + grace_s + 30),
        heartbeat_timeout=_s(20),
        # Never retried: a second attempt would inject the fault a second time.
        retry_policy=NO_RETRY,
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
    )


# --- the CLI's reads (FleetRead, workflows/reads.py) ---------------------------------------------
# Each waits at most `wait_s` for a worker, so a region queue that nobody serves answers "no worker
# polling <queue>" within seconds rather than QUEUE_WAIT_S; a lost attempt is retried like any read.


class ReadCall(Protocol[A_in, R_out]):
    def __call__(self, inp: A_in, *, queue: str | None = None, wait_s: float) -> Awaitable[R_out]: ...


def _read(
    name: str, arg: type[A], result: type[T], summary: Callable[[A], str], how: _Policy = FAST
) -> ReadCall[A, T]:
    """A read, 30 s an attempt, on `queue` (default: the workflow's own), waiting `wait_s` for a worker.

    `arg` only types the stub's input; the activity checks it.
    """

    async def call(inp: A, *, queue: str | None = None, wait_s: float) -> T:
        return await _call(
            name, inp, result, summary(inp), queue, 30, how, schedule_to_start_timeout=_s(wait_s)
        )

    return call


read_capacity = _read("get_capacity", RegionRequest, Capacity, lambda i: f"capacity of {i.region}")
list_backups = _read("list_backups", RegionRequest, BackupList, lambda i: f"backups in {i.region}")
describe_backup = _read("describe_backup", BackupName, BackupInfo, lambda i: f"backup {i.name} in {i.region}")
list_schedules = _read("list_schedules", RegionRequest, ScheduleList, lambda i: f"schedules in {i.region}")
# Once: a second attempt after a lost answer would find its own Schedule and report a conflict.
create_schedule = _read(
    "create_schedule", ScheduleWrite, ScheduleInfo, lambda i: f"create schedule {i.name} in {i.region}", ONCE
)
delete_schedule = _read(
    "delete_schedule", ScheduleWrite, ScheduleWrite, lambda i: f"delete schedule {i.name} in {i.region}", ONCE
)
last_backup = _read("last_backup", RegionRequest, LastBackup, lambda i: f"last backup in {i.region}")
read_release = _read("read_release", RegionRequest, Release, lambda i: f"release of {i.region}")
drill_history = _read("drill_history", DrillHistoryRequest, DrillHistory, lambda i: "drill history")
drill_report = _read("drill_report", DrillReportRequest, DrillReportText, lambda i: f"report of {i.drill_id}")


async def measure_lags(*, wait_s: float) -> LagList:
    # rclone's own timeout is at most activities.reads.LAG_TIMEOUT_S; one try, a status read waits for nobody.
    return await _call(
        "measure_lags", None, LagList, "replication lag", None, 45, ONCE, schedule_to_start_timeout=_s(wait_s)
    )
