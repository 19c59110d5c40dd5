"""The fleet as a running operation sees it: a `FleetSpec` snapshot of the config.

Workflows receive a `FleetSpec` snapshot instead of reading the config file: a workflow cannot do
I/O, and a snapshot keeps a running operation's view of the fleet stable while the file changes.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from drctl.config.capacity import RebalanceLimits, RebalanceMode, SloConfig
from drctl.config.quorum import QuorumConfig
from drctl.config.regions import RegionsByName
from drctl.config.schema import FleetConfig
from drctl.config.strict import BoundedScalars
from drctl.models.notify import WebhookSpec


# Bounded like the config it snapshots (a number finite and within 1e9, a duration 0..24 h, an
# interval 0..1 h): a spec sent straight through Temporal cannot break a timer either.
class RegionSpec(BoundedScalars):
    name: str
    weight: int
    replicas: int
    max_replicas: int
    queue: str = Field(description="Task queue served by this region's worker.")


class FleetSpec(BoundedScalars, RegionsByName[RegionSpec]):
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
    # Defaulted: specs recorded before it existed remind at 80 % of approval_timeout_s.
    approval_reminder_s: float | None = None
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
    # Off when absent: specs recorded before rebalancing existed replay without capacity reads.
    rebalance: RebalanceMode = Field("off", description="failover.rebalance.")
    rebalance_limits: RebalanceLimits = Field(
        default_factory=RebalanceLimits, description="failover.rebalance_limits."
    )
    slo: SloConfig = Field(default_factory=SloConfig, description="objectives.slo.")
    max_concurrency_per_replica: int | None = None

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
        if (r := self.find_region(name)) is None:
            raise ValueError(f"unknown region {name!r}; known regions: {', '.join(self.region_names)}")
        return r


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
