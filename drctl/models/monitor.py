"""The monitor's models: its per-region state machine, its state across continue-as-new, its status.

`workflows.monitor.FleetMonitor` keeps a MonitorState; the `status` query answers a MonitorStatus
(read by `drctl monitor status` and the worker's fleet metrics). Pure logic, free of Temporal.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from drctl.models.fleet_spec import FleetSpec
from drctl.models.health import ProbeStatus, RegionProbe, RegionState
from drctl.models.monitor_decisions import DecisionLog
from drctl.models.quorum import QuorumVote
from drctl.models.rebalance import RebalanceMemory
from drctl.models.tier_watch import TierSeen

# The monitor's alerts (MonitorState.alert), besides quorum's NO_QUORUM.
ALL_REGIONS_UNHEALTHY = "ALL_REGIONS_UNHEALTHY"
NO_FAILOVER_TARGET = "NO_FAILOVER_TARGET"
# A region in the monitor's spec that the worker's config cannot resolve: it is neither probed nor
# a failover target until the configs agree again.
REGION_UNRESOLVED = "REGION_UNRESOLVED"
PROBE_AUTH_REFUSED = "PROBE_AUTH_REFUSED"


# --- the monitor's per-region state machine ----------------------------------------------------


class RegionTracker(BaseModel):
    region: str
    state: RegionState = RegionState.HEALTHY
    consecutive_failures: int = 0
    consecutive_successes: int = 0
    since: datetime | None = Field(None, description="When the current state began.")
    first_failure_at: datetime | None = None
    last_good_at: datetime | None = None
    last_status: ProbeStatus | None = None
    last_reason: str = ""
    last_ttft_ms: float | None = None
    last_failing_fraction: float = 0.0
    last_probed_at: datetime | None = None
    passive_ttft_ms: float | None = Field(
        None,
        description="While SUSPECT on the passive signals' TTFT: the TTFT p99 they show at least "
        "(PassiveVerdict.ttft_floor_ms). Cleared when the region leaves SUSPECT.",
    )

    last_finished: float | None = Field(
        None, description="Requests the region's replicas had finished at the last probe (progress)."
    )
    saturated: str | None = Field(
        None,
        description="Set while the last probe failed only behind a full queue that still makes "
        "progress (drctl/models/saturation.py): counted as passed, for the rebalance to shed.",
    )

    def observe(self, passed: bool, at: datetime, failure_threshold: int, recovery_threshold: int) -> bool:
        """Feed one check; returns True when the state changed."""
        before = self.state
        if passed:
            self.consecutive_failures = 0
            self.consecutive_successes += 1
            self.last_good_at = at
            if self.state is RegionState.SUSPECT:
                self.state = RegionState.HEALTHY  # one blip, never confirmed: no hysteresis needed
                self.first_failure_at = None
            elif self.state is RegionState.UNHEALTHY:
                self.state = RegionState.RECOVERING
            if self.state is RegionState.RECOVERING and self.consecutive_successes >= recovery_threshold:
                self.state = RegionState.HEALTHY
                self.first_failure_at = None
        else:
            self.consecutive_successes = 0
            self.consecutive_failures += 1
            if self.state is RegionState.HEALTHY:
                self.first_failure_at = at
                self.state = RegionState.SUSPECT
            elif self.state is RegionState.RECOVERING:
                self.state = RegionState.UNHEALTHY  # relapse: recovery must start over
            if self.state is RegionState.SUSPECT and self.consecutive_failures >= failure_threshold:
                self.state = RegionState.UNHEALTHY
        if self.state is not RegionState.SUSPECT:
            self.passive_ttft_ms = None
        if self.state is not before:
            self.since = at
            return True
        return False

    def record_probe(self, probe: RegionProbe, at: datetime) -> None:
        self.last_status = probe.status
        self.last_reason = probe.reason
        self.last_ttft_ms = probe.ttft_p50_ms
        self.last_failing_fraction = probe.failing_fraction
        self.last_probed_at = at


def pick_target(
    trackers: dict[str, RegionTracker],
    source: str,
    weights: dict[str, int],
    exclude: frozenset[str] | set[str] = frozenset(),
) -> str | None:
    """The healthiest other region not excluded: HEALTHY before RECOVERING, then the larger configured weight."""
    rank = {RegionState.HEALTHY: 0, RegionState.RECOVERING: 1}
    candidates = [
        t for name, t in trackers.items() if name != source and name not in exclude and t.state in rank
    ]
    if not candidates:
        return None
    candidates.sort(key=lambda t: (rank[t.state], -weights.get(t.region, 0), t.region))
    return candidates[0].region


def choose_target(state: MonitorState, source: str, now: datetime) -> str | None:
    """The monitor's failover target for `source`.

    A healthy region whose failover has not just failed comes first (a target whose worker is dead
    would fail again); only when no other region is left is a recently failed target tried again.
    Regions the worker cannot resolve are never chosen. Expired avoidances are dropped from `state`.
    """
    state.avoid_targets = {r: until for r, until in state.avoid_targets.items() if until > now}
    unresolved = set(state.unresolved)
    weights = state.spec.weights
    return pick_target(
        state.trackers, source, weights, exclude=unresolved | set(state.avoid_targets)
    ) or pick_target(state.trackers, source, weights, exclude=unresolved)


# --- monitor -----------------------------------------------------------------------------------


class FailoverRecord(BaseModel):
    workflow_id: str
    run_id: str | None = None
    source: str
    target: str
    started_at: datetime
    status: str = "running"
    rto_s: float | None = None
    finished_at: datetime | None = None


class MonitorInput(BaseModel):
    spec: FleetSpec
    max_iterations: int = Field(500, description="Continue as new after this many probe rounds.")
    state: MonitorState | None = Field(None, description="Carried across continue-as-new.")


class MonitorState(BaseModel):
    """Everything the monitor carries across continue-as-new."""

    spec: FleetSpec
    max_iterations: int = 500
    policy: Literal["automatic", "manual"]
    paused: bool = False
    trackers: dict[str, RegionTracker]
    iteration: int = 0
    total_iterations: int = 0
    probe_rounds: int = Field(0, description="Active probe rounds over all runs, the watcher's included.")
    alert: str | None = None
    failed_over: list[FailoverRecord] = Field(default_factory=list, description="Awaiting failback.")
    last_failover: FailoverRecord | None = None
    last_failback: str | None = None
    next_failover_attempt_at: datetime | None = None
    avoid_targets: dict[str, datetime] = Field(
        default_factory=dict,
        description="Targets whose failover just failed, until when: another region goes first.",
    )
    unresolved: dict[str, str] = Field(
        default_factory=dict, description="Regions the worker cannot resolve, why."
    )
    votes: dict[str, QuorumVote] = Field(
        default_factory=dict, description="The last quorum vote on each UNHEALTHY region (health.quorum)."
    )
    decisions: DecisionLog = Field(
        default_factory=DecisionLog,
        description="Why traffic is where it is: the fleet's bounded decision log.",
    )
    rebalance_memory: RebalanceMemory = Field(
        default_factory=RebalanceMemory, description="The rebalance ticks' samples and breach windows."
    )
    tier_seen: TierSeen | None = Field(
        None, description="The global tier as the tier watch last read it (workflows/monitor_tier.py)."
    )

    @classmethod
    def initial(cls, inp: MonitorInput) -> MonitorState:
        return cls(
            spec=inp.spec,
            max_iterations=inp.max_iterations,
            policy=inp.spec.policy,
            trackers={r.name: RegionTracker(region=r.name) for r in inp.spec.regions},
        )


class MonitorStatus(BaseModel):
    fleet: str
    policy: str
    paused: bool
    alert: str | None
    iteration: int = Field(description="Monitor loop turns: probe rounds, or with the watcher its returns.")
    regions: dict[str, RegionTracker]
    probe_rounds: int = Field(0, description="Active probe rounds; the live view adds the running watcher's.")
    watching: bool = Field(False, description="Live view: a watcher call is running.")
    heartbeat_age_s: float | None = Field(
        None, description="Live view: age of the watcher's last heartbeat, s."
    )
    heartbeat_stale: bool = Field(False, description="Live view: heartbeat too old to show as current.")
    active_failover: FailoverRecord | None = None
    failed_over: list[FailoverRecord] = Field(default_factory=list)
    last_failover: FailoverRecord | None = None
    last_failback: str | None = None
    weights: dict[str, int] = Field(
        default_factory=dict, description="Configured weights the monitor works with."
    )
    unresolved: dict[str, str] = Field(default_factory=dict)
    avoid_targets: dict[str, datetime] = Field(default_factory=dict)
    votes: dict[str, QuorumVote] = Field(default_factory=dict)

    @classmethod
    def of(cls, s: MonitorState, active: FailoverRecord | None) -> MonitorStatus:
        """What the `status` query answers: mostly the state's own fields, under the same names."""
        return cls(
            fleet=s.spec.fleet,
            iteration=s.total_iterations,
            regions=s.trackers,
            active_failover=active,
            weights=s.spec.weights,
            **{name: getattr(s, name) for name in _STATE_FIELDS},
        )


# MonitorStatus fields that are MonitorState's, by the same name.
_STATE_FIELDS = (
    "policy",
    "paused",
    "alert",
    "probe_rounds",
    "failed_over",
    "last_failover",
    "last_failback",
    "unresolved",
    "avoid_targets",
    "votes",
)


class PolicyUpdate(BaseModel):
    policy: Literal["automatic", "manual"]


MonitorInput.model_rebuild()
