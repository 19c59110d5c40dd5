"""Operation models shared by every mutating workflow (failover, failback, upgrade, migrate, drill).

Workflows receive a `FleetSpec` snapshot instead of reading the config file: a workflow cannot do
I/O, and a snapshot keeps a running operation's view of the fleet stable while the file changes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from drctl.config.quorum import QuorumConfig
from drctl.config.schema import FleetConfig
from drctl.models.health import RegionProbe
from drctl.models.notify import WebhookSpec

# ApplicationError.type raised when another mutating operation already holds the fleet.
FLEET_BUSY = "FleetBusy"

# Handler names every mutating workflow offers, so `drctl ops` drives any of them alike.
QUERY_PROGRESS = "progress"
UPDATE_APPROVE = "approve"
UPDATE_ABORT = "abort"

# Phases written to DrctlPhase (operations add their own; these are the shared ones).
PHASE_PENDING = "pending"
PHASE_CLAIM = "claim"
PHASE_PREFLIGHT = "preflight"
PHASE_AWAITING_APPROVAL = "awaiting-approval"
PHASE_SCALE = "scale"
PHASE_SHIFT = "shift"
PHASE_VERIFY = "verify"
PHASE_PROPAGATE = "propagate"  # verified, waiting for the global change to be INSYNC (Route 53)
PHASE_COMPENSATE = "compensate"
PHASE_DONE = "done"
PHASE_FAILED = "failed"


class OperationInfo(BaseModel):
    """A running (or recent) operation as visibility reports it."""

    workflow_id: str
    run_id: str | None = None
    operation: str
    fleet: str
    phase: str | None = None
    source: str | None = None
    target: str | None = None
    status: str = "RUNNING"
    start_time: datetime | None = None
    ui_link: str | None = None


class RegionSpec(BaseModel):
    name: str
    weight: int
    replicas: int
    max_replicas: int
    queue: str = Field(description="Task queue served by this region's worker.")


class FleetSpec(BaseModel):
    """What a workflow needs to know about the fleet, snapshotted from the config at start."""

    fleet: str
    task_queue: str
    regions: list[RegionSpec]
    deployment: str = Field(description="The stable Deployment name, <app>-stable.")
    interval_s: float
    probe_timeout_s: float
    failure_threshold: int
    recovery_threshold: int
    fast_confirm: bool
    fast_confirm_interval_s: float
    fail_on_degraded: bool
    rto_target_s: float
    policy: Literal["automatic", "manual"]
    require_approval: bool
    approval_timeout_s: float
    verify_requests: int
    verify_timeout_s: float
    rollout_timeout_s: float
    stabilization_window_s: float
    failback_steps: int
    failback_step_interval_s: float
    # Optional (absent from specs recorded before they existed): failover capacity sizing.
    max_rps_per_replica: float | None = None
    peak_rps: float | None = None
    # Defaults keep specs recorded before these fields existed (replayed histories) valid.
    global_ttl_s: float = Field(0.0, description="Global tier record TTL (Route 53), 0 for HAProxy, s.")
    global_propagation_timeout_s: float = Field(
        180.0, description="How long an operation waits for a global weight change to be INSYNC, s."
    )
    # Defaulted: histories recorded before notifications existed must still replay.
    webhooks: list[WebhookSpec] = Field(default_factory=list, description="Webhooks (no URLs or keys).")
    # Defaulted off: histories recorded before the watcher existed replay the round-per-probe loop.
    watcher: bool = Field(False, description="health.watcher: detection in one long-lived activity.")
    watcher_checkpoint_s: float = Field(600.0, description="health.watcher_checkpoint_s.")
    # Off when absent: specs recorded before the quorum existed replay the single-vantage decision.
    quorum: QuorumConfig = Field(
        default_factory=lambda: QuorumConfig(mode="off"), description="health.quorum."
    )

    @property
    def verify_deadline_s(self) -> float:
        """Verification window: resolvers keep the old answer up to one TTL after the change."""
        return self.verify_timeout_s + self.global_ttl_s

    @classmethod
    def from_config(cls, cfg: FleetConfig) -> FleetSpec:
        """The spec of `cfg`: every field copied from its config section (`_COPIED`), plus the derived ones."""
        copied = {name: getattr(getattr(cfg, section), field) for name, (section, field) in _COPIED.items()}
        return cls(
            fleet=cfg.name,
            task_queue=cfg.temporal.task_queue,
            regions=[RegionSpec(**{f: getattr(r, f) for f in RegionSpec.model_fields}) for r in cfg.regions],
            deployment=cfg.workload.deployment_name("stable"),
            # HAProxy has no TTL and applies at once: defaults stand for it.
            global_ttl_s=float(getattr(cfg.traffic.global_tier, "ttl_s", 0)),
            global_propagation_timeout_s=float(
                getattr(cfg.traffic.global_tier, "propagation_timeout_s", 180.0)
            ),
            webhooks=[WebhookSpec.from_config(w) for w in cfg.notifications.webhooks],
            **copied,
        )

    def region(self, name: str) -> RegionSpec:
        for r in self.regions:
            if r.name == name:
                return r
        raise ValueError(f"unknown region {name!r}; known regions: {', '.join(self.region_names)}")

    @property
    def region_names(self) -> list[str]:
        return [r.name for r in self.regions]

    @property
    def weights(self) -> dict[str, int]:
        return {r.name: r.weight for r in self.regions}


class PhaseTiming(BaseModel):
    phase: str
    started_at: datetime
    ended_at: datetime | None = None
    duration_s: float | None = None


class OperationProgress(BaseModel):
    """What the `progress` query returns: enough for the CLI's live view."""

    operation: str
    phase: str
    details: str = ""
    awaiting_approval: bool = False
    phases: list[PhaseTiming] = Field(default_factory=list)


class ApproveInput(BaseModel):
    approver: str = Field("operator", description="Who approved, for the audit trail.")
    comment: str = ""


class AbortInput(BaseModel):
    reason: str = Field("aborted by operator", min_length=1)
    by: str = "operator"


# --- Activity I/O shared by every workflow that moves traffic or scales ----------------------------


class RegionRequest(BaseModel):
    region: str


class ProbeRequest(BaseModel):
    regions: list[str]


class ProbeBatch(BaseModel):
    """One probe round: a result per region (the prober never raises for an unhealthy target)."""

    probes: list[RegionProbe]
    unresolved: dict[str, str] = Field(
        default_factory=dict, description="Regions the worker's config does not define, with why: not probed."
    )


class Weights(BaseModel):
    weights: dict[str, int]


class SetWeightsInput(BaseModel):
    weights: dict[str, int]
    reason: str = ""


class Capacity(BaseModel):
    region: str
    deployment: str
    replicas: int
    ready_replicas: int
    max_replicas: int
    hpa_min_replicas: int | None = None
    hpa_max_replicas: int | None = None


class ScaleInput(BaseModel):
    region: str
    replicas: int
    deployment: str | None = Field(None, description="Default: the stable Deployment.")


class WaitRolloutInput(BaseModel):
    region: str
    timeout_s: float
    deployment: str | None = None


class DeploymentStatus(BaseModel):
    region: str
    deployment: str
    replicas: int
    ready_replicas: int
    updated_replicas: int
    available_replicas: int
    rolled_out: bool


class VerifyInput(BaseModel):
    requests: int = Field(ge=1, le=1000)
    timeout_s: float = Field(gt=0, description="Deadline for the whole batch.")
    request_timeout_s: float = 3.0


class VerifyResult(BaseModel):
    total: int
    ok: int
    errors: int
    by_region: dict[str, int] = Field(
        default_factory=dict, description="Successes per region, from region_header."
    )
    unattributed: int = Field(
        0, description="Successes without the region header: served, but by an unknown region."
    )
    auth_rejected: int = Field(0, description="Answers 401/403: the global endpoint refused drctl's token.")
    region_header: str = Field("", description="The response header read for the serving region.")
    error_samples: list[str] = Field(default_factory=list)

    def served_by(self, regions: list[str]) -> int:
        return sum(self.by_region.get(r, 0) for r in regions)


# The config sections a FleetSpec snapshots. A spec field named like a field of exactly one of them
# is copied from it; `_RENAMED` gives the source of a field named otherwise; `_DERIVED` fields are
# computed in `from_config`. Anything else is an error at import, so a new spec field cannot be
# silently left at its default.
_SECTIONS = ("health", "objectives", "failover", "failback", "workload")
_RENAMED = {
    "failback_steps": ("failback", "steps"),
    "failback_step_interval_s": ("failback", "step_interval_s"),
}
_DERIVED = {
    "fleet",
    "task_queue",
    "regions",
    "deployment",
    "global_ttl_s",
    "global_propagation_timeout_s",
    "webhooks",
}


def _copied_fields() -> dict[str, tuple[str, str]]:
    sections = {name: FleetConfig.model_fields[name].annotation for name in _SECTIONS}
    copied = dict(_RENAMED)
    for name in FleetSpec.model_fields.keys() - _DERIVED - _RENAMED.keys():
        found = [sec for sec, model in sections.items() if name in getattr(model, "model_fields", {})]
        if len(found) != 1:
            raise TypeError(
                f"FleetSpec.{name}: found in config sections {found or 'none'} of {_SECTIONS}; "
                "name exactly one in _RENAMED or derive it in from_config"
            )
        copied[name] = (found[0], name)
    return copied


_COPIED = _copied_fields()
