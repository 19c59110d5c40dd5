"""The watcher's contract and its pure steps: feed probes and passive verdicts to the region trackers.

The watcher (activities/watch.py) runs the probe loop inside one long-lived, heartbeating activity
and returns to the monitor only when a region changes state or a checkpoint is due, so a quiet
fleet costs a handful of history events an hour instead of a dozen per probe round. The steps
here are the same state machine the monitor runs per round (RegionTracker.observe, probe_passes):
the monitor stays the authority on what a state means (failover, failback, alerts).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from drctl.models.fleet_spec import FleetSpec
from drctl.models.health import ProbeStatus, RegionProbe, RegionState
from drctl.models.monitor import RegionTracker
from drctl.models.passive import PassiveSignal, PassiveVerdict
from drctl.models.saturation import judge_probe

# The watcher's probe settings: the FleetSpec fields of the same names.
PROBE_SETTINGS = (
    "interval_s",
    "fast_confirm",
    "fast_confirm_interval_s",
    "failure_threshold",
    "recovery_threshold",
    "fail_on_degraded",
    "probe_timeout_s",
)


class WatchCarry(BaseModel):
    """What the watcher carries from call to call and from attempt to attempt: in with WatchInput,
    heartbeated in WatchProgress, back to the monitor in WatchResult."""

    trackers: dict[str, RegionTracker]
    unresolved: dict[str, str] = Field(
        default_factory=dict, description="As the monitor knows them: a change returns."
    )
    refused: list[str] = Field(
        default_factory=list, description="Regions refusing drctl's token in the last round."
    )
    quiet_until: dict[str, datetime] = Field(
        default_factory=dict,
        description="Per region: passive SUSPECT ignored until then (a probe cleared it); kept across calls.",
    )


class WatchInput(WatchCarry):
    """What one watcher attempt needs: the trackers to resume and the monitor's spec settings."""

    regions: list[str]
    interval_s: float
    fast_confirm: bool
    fast_confirm_interval_s: float
    failure_threshold: int
    recovery_threshold: int
    fail_on_degraded: bool
    probe_timeout_s: float
    shed_saturation: bool = Field(
        False,
        description="The rebalance is automatic: a probe that failed only behind a full, progressing "
        "queue counts as good (drctl/models/saturation.py).",
    )
    expected_replicas: dict[str, int] = Field(
        default_factory=dict, description="Per region: its configured replicas (saturation needs lost ones)."
    )
    return_after_s: float = Field(
        description="Return by then even with no transition: the monitor's checkpoint."
    )

    @classmethod
    def for_spec(cls, spec: FleetSpec, **resume: Any) -> WatchInput:
        """A call watching `spec`'s regions with its probe settings and checkpoint, resuming from
        `resume` (trackers, unresolved, refused, quiet_until)."""
        settings = {name: getattr(spec, name) for name in PROBE_SETTINGS}
        return cls(
            regions=spec.region_names,
            return_after_s=spec.watcher_checkpoint_s,
            shed_saturation=spec.rebalance == "automatic",
            expected_replicas={r.name: r.replicas for r in spec.regions},
            **settings,
            **resume,
        )


class WatchCounts(WatchCarry):
    rounds: int = Field(0, description="Active probe rounds run by this call, over all attempts.")
    passive_reads: int = 0
    resumed: int = Field(0, description="Attempts that resumed from a heartbeat.")


class WatchProgress(WatchCounts):
    """The heartbeat details: a retried attempt (worker restart) resumes from these."""

    started_at: datetime


class WatchResult(WatchCounts):
    changed: list[str] = Field(default_factory=list, description="Regions whose state changed, in order.")
    reason: Literal["transition", "checkpoint", "unresolved"]


def feed_probe(
    t: RegionTracker, probe: RegionProbe, at: datetime, inp: WatchInput, breach_threshold: int | None = None
) -> bool:
    """One active probe into the tracker, exactly as the monitor's round does; True on a state change.

    AUTH (credentials refused) leaves the state as it is: a config error, not an outage.
    `breach_threshold` is given while the region's passive signal breaches its limits: that many
    failed probes in a row then suffice (health.passive.confirm_probes), since users' own requests
    and the probe agree; never more than health.failure_threshold.
    """
    t.record_probe(probe, at)
    if probe.status is ProbeStatus.AUTH:
        return False
    threshold = (
        inp.failure_threshold if breach_threshold is None else min(breach_threshold, inp.failure_threshold)
    )
    passed = judge_probe(
        t, probe, inp.fail_on_degraded, inp.shed_saturation, inp.expected_replicas.get(t.region)
    )
    return t.observe(passed, at, threshold, inp.recovery_threshold)


def feed_passive(
    t: RegionTracker, verdict: PassiveVerdict, at: datetime, quiet_until: datetime | None
) -> bool:
    """A passive breach makes a HEALTHY region SUSPECT at once; the active probe confirms or clears it.

    It counts as no failed check (only probes move a region to UNHEALTHY), and after a probe has
    cleared a passive suspicion it is ignored until `quiet_until`, so a region that breaches the
    passive limits but passes the probe does not flap SUSPECT/HEALTHY every second.
    """
    if verdict.signal is not PassiveSignal.SUSPECT or t.state is not RegionState.HEALTHY:
        return False
    if quiet_until is not None and at < quiet_until:
        return False
    t.state, t.since, t.first_failure_at = RegionState.SUSPECT, at, at
    t.last_reason = f"passive: {verdict.reason}"
    t.passive_ttft_ms = verdict.ttft_floor_ms
    return True


def probe_period_s(trackers: dict[str, RegionTracker], inp: WatchInput) -> float:
    """Seconds to the next probe round: fast confirm while any region is SUSPECT, as the monitor does."""
    if inp.fast_confirm and any(t.state is RegionState.SUSPECT for t in trackers.values()):
        return inp.fast_confirm_interval_s
    return inp.interval_s
