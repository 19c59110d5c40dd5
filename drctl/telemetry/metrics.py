"""drctl's Prometheus metrics, recorded by activities and the worker, never by workflow code.

Workflows replay: a counter incremented in workflow code would count again on every replay, so
every figure here is recorded where work really happens (an activity, or the worker's scrape-time
reader in drctl/worker/fleet_metrics.py). Each worker exports what it observed; dashboards and alerts
aggregate across workers with `max by`/`sum by`.

Names follow the Prometheus conventions: base units in the name (`_seconds`), counters end in
`_total`, and enumerations are one series per value set to 1 or 0 (as kube-state-metrics does).
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from importlib import metadata

from prometheus_client import Counter, Gauge, Histogram

from drctl.models.health import ProbeStatus, RegionProbe, RegionState
from drctl.models.rpo import LagReport, ReplicaPair

# RTOs land between seconds and minutes; the edges bracket the 30 s default target closely.
RTO_BUCKETS = (1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 300, 600)
PROBE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10)

REGION_STATE = Gauge(
    "drctl_region_state",
    "The monitor's state of a region: 1 for the current state, 0 otherwise.",
    ["fleet", "region", "state"],
)
PROBE_STATUS = Gauge(
    "drctl_region_probe_status",
    "Status of the latest probe of a region: 1 for it, 0 otherwise.",
    ["fleet", "region", "status"],
)
PROBES = Counter(
    "drctl_probes_total", "Probes of a region by resulting status.", ["fleet", "region", "status"]
)
TTFT_P50 = Gauge(
    "drctl_region_ttft_p50_seconds",
    "Median time to first token over the latest probe's replicas.",
    ["fleet", "region"],
)
# `_ratio`, not `_fraction`: the Prometheus naming convention for a 0..1 share.
FAILING_RATIO = Gauge(
    "drctl_region_failing_ratio",
    "Share (0..1) of a region's replicas not HEALTHY at the latest probe.",
    ["fleet", "region"],
)
PROBE_TIME = Gauge(
    "drctl_region_last_probe_timestamp_seconds",
    "When the latest probe of a region finished (Unix time).",
    ["fleet", "region"],
)
PROBE_DURATION = Histogram(
    "drctl_probe_duration_seconds",
    "Wall time of one inference-aware probe of a region.",
    ["fleet", "region"],
    buckets=PROBE_BUCKETS,
)
WEIGHT = Gauge(
    "drctl_region_weight",
    "Global traffic weight of a region, as the global tier last reported it.",
    ["fleet", "region"],
)


def rto_histogram(name: str, documentation: str) -> Histogram:
    """A per-fleet RTO histogram, on the buckets the RTO alerts and the dashboard are written for."""
    return Histogram(name, documentation, ["fleet"], buckets=RTO_BUCKETS)


FAILOVERS = Counter("drctl_failovers_total", "Finished failovers by result.", ["fleet", "result"])
FAILBACKS = Counter("drctl_failbacks_total", "Finished failbacks by result.", ["fleet", "result"])
RTO = rto_histogram(
    "drctl_failover_rto_seconds", "Measured RTO of successful failovers: fault to verified traffic."
)
LAST_RTO = Gauge(
    "drctl_failover_last_rto_seconds", "Measured RTO of the latest successful failover.", ["fleet"]
)
RTO_TARGET = Gauge("drctl_rto_target_seconds", "The fleet's configured RTO target.", ["fleet"])
RTO_MISSED = Counter(
    "drctl_failover_rto_missed_total",
    "Successful failovers whose measured RTO exceeded the target.",
    ["fleet"],
)
LAST_FAILOVER = Gauge(
    "drctl_last_failover_timestamp_seconds",
    "When the latest failover finished, by result.",
    ["fleet", "result"],
)

OPERATIONS = Gauge(
    "drctl_operation_in_progress",
    "Running mutating operations by kind and phase.",
    ["fleet", "operation", "phase"],
)
MONITOR_RUNNING = Gauge(
    "drctl_monitor_running", "1 while the fleet's FleetMonitor workflow runs, else 0.", ["fleet"]
)

DRILLS = Counter("drctl_drills_total", "Finished chaos drills by verdict.", ["fleet", "verdict"])
DRILL_RTO = rto_histogram(
    "drctl_drill_rto_seconds", "RTO measured by chaos drills from their own load samples."
)
LAST_PASSING_DRILL = Gauge(
    "drctl_last_passing_drill_timestamp_seconds", "When the latest passing drill finished.", ["fleet"]
)

BACKUPS = Counter("drctl_backups_total", "Finished Velero backups by result.", ["fleet", "region", "result"])
LAST_BACKUP = Gauge(
    "drctl_last_successful_backup_timestamp_seconds",
    "When the latest successful backup completed.",
    ["fleet", "region"],
)
BACKUP_MAX_AGE = Gauge(
    "drctl_backup_max_age_seconds", "Configured age after which the newest backup is overdue.", ["fleet"]
)
# The operating signals' gauges (docs/runbooks.md): one label set per thing an alert names.
_REPLICA = ("fleet", "bucket", "source_region", "replica_region")
_SCHEDULE = ("fleet", "schedule")
REPLICATION_LAG = Gauge(
    "drctl_replication_lag_seconds", "Age of the oldest source object a replica lacks (0: in sync).", _REPLICA
)
REPLICATION_BEHIND = Gauge(
    "drctl_replication_objects_behind", "Source objects a replica lacks or holds differently.", _REPLICA
)
# A lag that cannot be measured (Replicate stopped, source unreachable) drops its series above, so
# the lag alert cannot fire on it: these two let DrctlReplicationLagUnmeasured notice the silence.
REPLICATION_MEASURED = Gauge(
    "drctl_replication_lag_measured_timestamp_seconds",
    "When a replica's lag was last measured (Unix time); the worker's start until it first is.",
    _REPLICA,
)
REPLICATION_INTERVAL = Gauge(
    "drctl_replication_interval_seconds", "A replica's configured replication interval.", _REPLICA
)
RPO_TARGET = Gauge("drctl_rpo_target_seconds", "The fleet's configured RPO target.", ["fleet"])
OPERATION_RESULT = Gauge(
    "drctl_operation_last_result_timestamp_seconds",
    "When the newest upgrade, migration, restore or drill with this result closed (Unix time).",
    ("fleet", "operation", "result"),
)
QUEUE_POLLERS = Gauge(
    "drctl_task_queue_pollers",
    "Workers that polled a region's activity task queue within the last two minutes.",
    ("fleet", "region", "task_queue"),
)
APPROVAL_PENDING = Gauge(
    "drctl_approval_pending_since_timestamp_seconds",
    "When a running operation started waiting for its approval (Unix time); absent once approved.",
    ("fleet", "operation", "workflow_id"),
)
DRILL_SCHEDULE_LAST_ACTION = Gauge(
    "drctl_drill_schedule_last_action_timestamp_seconds",
    "When a drill schedule last started a drill, or its creation time if it never has (Unix time).",
    _SCHEDULE,
)
DRILL_SCHEDULE_PAUSED = Gauge("drctl_drill_schedule_paused", "1 while a drill schedule is paused.", _SCHEDULE)
MONITOR_ALERT = Gauge(
    "drctl_monitor_alert",
    "The monitor's standing alert (e.g. NO_QUORUM): 1 while it stands.",
    ("fleet", "alert"),
)
WORKER_TEMPORAL_DISCONNECTED = Gauge(
    "drctl_worker_temporal_disconnected_seconds",
    "How long this worker has been unable to reach Temporal (0 while connected).",
)
BUILD_INFO = Gauge(
    "drctl_build_info",
    "Always 1; the labels say which drctl build this worker runs (Prometheus's *_build_info convention).",
    ("version", "python_version", "temporalio_version"),
)
SEARCH_ATTRIBUTES_MISSING = Gauge(
    "drctl_search_attributes_missing",
    "Search attributes drctl upserts that the worker's Temporal namespace lacks (or types wrongly).",
    ("namespace",),
)

# Known results, created at 0 when a worker starts: Prometheus's increase() cannot see the first
# increment of a series that did not exist before it, so the first failure would never alert.
FAILOVER_RESULTS = ("succeeded", "failed", "refused", "aborted", "unverified")
FAILBACK_RESULTS = ("succeeded", "rolled_back", "failed", "not_needed")
DRILL_VERDICTS = ("PASS", "FAILED", "ABORTED")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


BUILD_INFO.labels(
    version=_version("drctl"),
    python_version=platform.python_version(),
    temporalio_version=_version("temporalio"),
).set(1)


def init_fleet(
    fleet: str, regions: Iterable[str], rto_target_s: float, backup_max_age_s: float, rpo_target_s: float
) -> None:
    """Create every counter series at 0 and set the configured objectives."""
    for r in FAILOVER_RESULTS:
        FAILOVERS.labels(fleet=fleet, result=r)
    for r in FAILBACK_RESULTS:
        FAILBACKS.labels(fleet=fleet, result=r)
    for v in DRILL_VERDICTS:
        DRILLS.labels(fleet=fleet, verdict=v)
    for region in regions:
        for r in ("succeeded", "failed"):
            BACKUPS.labels(fleet=fleet, region=region, result=r)
    RTO_MISSED.labels(fleet=fleet)
    RTO.labels(fleet=fleet)
    DRILL_RTO.labels(fleet=fleet)
    RTO_TARGET.labels(fleet=fleet).set(rto_target_s)
    RPO_TARGET.labels(fleet=fleet).set(rpo_target_s)
    BACKUP_MAX_AGE.labels(fleet=fleet).set(backup_max_age_s)


def init_replicas(fleet: str, pairs: Iterable[ReplicaPair], started_at: float) -> None:
    """Every configured replica's interval, and its last measurement starting at the worker's start.

    Not 0: after a restart of every worker, a pair replicated hourly would read as unmeasured for
    decades until its next run. From the start, silence counts only once it is longer than allowed.
    """
    for p in pairs:
        labels = (fleet, p.bucket, p.source_region, p.replica_region)
        REPLICATION_INTERVAL.labels(*labels).set(p.interval_s)
        set_if_newer(REPLICATION_MEASURED.labels(*labels), started_at)


def one_hot(gauge: Gauge, labels: Mapping[str, str], key: str, values: Iterable[str], current: str) -> None:
    """Set the series of `current` to 1 and every other value's series to 0."""
    for v in values:
        gauge.labels(**labels, **{key: v}).set(1 if v == current else 0)


def record_probe(fleet: str, probe: RegionProbe, finished_at: float) -> None:
    labels = {"fleet": fleet, "region": probe.region}
    one_hot(PROBE_STATUS, labels, "status", [s.value for s in ProbeStatus], probe.status.value)
    PROBES.labels(**labels, status=probe.status.value).inc()
    FAILING_RATIO.labels(**labels).set(probe.failing_fraction)
    PROBE_DURATION.labels(**labels).observe(probe.duration_ms / 1000)
    PROBE_TIME.labels(**labels).set(finished_at)
    if probe.ttft_p50_ms is not None:
        TTFT_P50.labels(**labels).set(probe.ttft_p50_ms / 1000)
    else:
        # No replica answered a completion: the last figure would be a lie, so drop the series.
        _remove(TTFT_P50, fleet, probe.region)


def record_region_states(fleet: str, states: Mapping[str, str]) -> None:
    for region, state in states.items():
        one_hot(
            REGION_STATE, {"fleet": fleet, "region": region}, "state", [s.value for s in RegionState], state
        )


def record_weights(fleet: str, weights: Mapping[str, int]) -> None:
    for region, w in weights.items():
        WEIGHT.labels(fleet=fleet, region=region).set(w)


def record_failover(
    fleet: str, result: str, rto_s: float | None, rto_target_s: float, finished_at: float
) -> None:
    FAILOVERS.labels(fleet=fleet, result=result).inc()
    LAST_FAILOVER.labels(fleet=fleet, result=result).set(finished_at)
    RTO_TARGET.labels(fleet=fleet).set(rto_target_s)
    if result == "succeeded" and rto_s is not None:
        RTO.labels(fleet=fleet).observe(rto_s)
        LAST_RTO.labels(fleet=fleet).set(rto_s)
        if rto_s > rto_target_s:
            RTO_MISSED.labels(fleet=fleet).inc()


def record_failback(fleet: str, result: str) -> None:
    FAILBACKS.labels(fleet=fleet, result=result).inc()


def record_drill(fleet: str, verdict: str, rto_s: float | None, finished_at: float) -> None:
    DRILLS.labels(fleet=fleet, verdict=verdict).inc()
    if rto_s is not None:
        DRILL_RTO.labels(fleet=fleet).observe(rto_s)
    if verdict == "PASS":
        set_if_newer(LAST_PASSING_DRILL.labels(fleet=fleet), finished_at)


def record_backup(fleet: str, region: str, ok: bool, completed_at: float | None) -> None:
    BACKUPS.labels(fleet=fleet, region=region, result="succeeded" if ok else "failed").inc()
    if ok and completed_at is not None:
        set_if_newer(LAST_BACKUP.labels(fleet=fleet, region=region), completed_at)


def record_lag(fleet: str, report: LagReport) -> None:
    """One replica's measured lag; an unmeasurable one drops its series rather than show an old figure."""
    labels = (fleet, report.bucket, report.source_region, report.replica_region)
    if report.error or report.lag_s is None:
        _remove(REPLICATION_LAG, *labels)
        _remove(REPLICATION_BEHIND, *labels)
        return
    REPLICATION_LAG.labels(*labels).set(report.lag_s)
    REPLICATION_BEHIND.labels(*labels).set(report.unreplicated)
    set_if_newer(REPLICATION_MEASURED.labels(*labels), report.measured_at.timestamp())


def record_monitor_alert(fleet: str, alert: str | None) -> None:
    for labels in [k for k in MONITOR_ALERT._metrics if k[0] == fleet]:  # noqa: SLF001 - no public lister
        if labels[1] != alert:
            MONITOR_ALERT.remove(*labels)
    if alert:
        MONITOR_ALERT.labels(fleet=fleet, alert=alert).set(1)


def set_if_newer(child: Gauge, ts: float) -> None:
    # A late report of an older event (history read at start, a retried activity) never moves it back.
    if ts > child._value.get():  # noqa: SLF001 - prometheus_client has no public getter
        child.set(ts)


def _remove(gauge: Gauge, *labels: str) -> None:
    try:
        gauge.remove(*labels)
    except KeyError:
        pass
