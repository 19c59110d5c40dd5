"""The decision core's settings: one flat model, built from the fleet's spec or given by a test."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from drctl.models.fleet_spec import FleetSpec


class DecisionConfig(BaseModel):
    """Thresholds, windows and steps of the core (docs/decisions.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    interval_s: float = Field(10.0, gt=0, description="Seconds between ticks (health checks).")
    failure_threshold: int = Field(3, ge=1, description="Consecutive failed ticks before a region is DOWN.")
    recovery_threshold: int = Field(
        3,
        ge=1,
        description="Consecutive passed ticks before a DOWN region is HEALTHY again (RECOVERING until then).",
    )
    rto_target_s: float = Field(30.0, gt=0, description="Fault to traffic fully served elsewhere, s.")
    quorum: int = Field(
        0, ge=0, description="Vantage points that must vote 'down' to confirm DOWN; 0 or 1: no quorum."
    )
    mode: Literal["automatic", "advise", "off"] = Field(
        "automatic", description="Rebalance (shed, return, reconcile): apply, only report, or not at all."
    )
    policy: Literal["automatic", "manual"] = Field(
        "automatic", description="Failover: apply, or decide and report for an operator to apply."
    )
    stability_window_s: float = Field(
        30.0,
        ge=0,
        description="A region's weight changes direction at most once per this long, s (default "
        "max(30, 3 x interval_s)); moves off a DOWN region are exempt.",
    )
    breach_window_s: float = Field(
        2.0, ge=0, description="A region must be SATURATED or over capacity this long before it sheds, s."
    )
    shed_step_interval_s: float = Field(5.0, ge=0, description="Least time between two shed steps, s.")
    return_stable_s: float = Field(
        30.0, ge=0, description="A region must be HEALTHY this long before share returns to it, s."
    )
    return_step_pct: int = Field(
        34, ge=1, le=100, description="Most share a failback or return step gives back, % of total."
    )
    min_step_pct: int = Field(5, ge=1, le=100, description="A shed or return of less share is not made, %.")
    target_utilisation: float = Field(
        0.8, gt=0, le=1, description="Usable capacity = capacity x this; the rest is headroom."
    )
    slo_ttft_p99_ms: float = Field(200.0, gt=0, description="The objective for TTFT p99, ms.")
    slo_error_rate: float = Field(0.01, ge=0, le=1, description="The failed share the objective allows.")
    degraded_failing_fraction: float = Field(
        0.25,
        gt=0,
        le=1,
        description="A region with more than this fraction of its ready replicas failing (but some "
        "answering) is DEGRADED; at or below it, a minority failing, it is HEALTHY.",
    )
    backoff_s: float = Field(
        30.0, ge=0, description="After a failed apply, only safety moves for this long, s."
    )

    @model_validator(mode="before")
    @classmethod
    def _default_stability_window(cls, data: Any) -> Any:
        # The default depends on interval_s: a window shorter than three ticks would let noise flap.
        if isinstance(data, dict) and "stability_window_s" not in data:
            interval = data.get("interval_s", 10.0)
            if isinstance(interval, int | float):
                return {**data, "stability_window_s": max(30.0, 3 * float(interval))}
        return data

    @classmethod
    def from_spec(cls, spec: FleetSpec) -> DecisionConfig:
        """The core's settings for the fleet `spec` describes."""
        limits = spec.rebalance_limits
        # Majority of the vantage points: the monitor's probe plus every other region's worker.
        quorum = len(spec.regions) // 2 + 1 if spec.quorum.mode == "majority" else 0
        return cls(
            interval_s=spec.interval_s,
            failure_threshold=spec.failure_threshold,
            recovery_threshold=spec.recovery_threshold,
            rto_target_s=spec.rto_target_s,
            quorum=quorum,
            mode=spec.rebalance,
            policy=spec.policy,
            stability_window_s=max(30.0, 3 * spec.interval_s, spec.stabilization_window_s),
            breach_window_s=limits.breach_window_s,
            shed_step_interval_s=limits.shed_step_interval_s,
            return_stable_s=max(limits.return_stable_s, spec.stabilization_window_s),
            return_step_pct=math.ceil(100 / spec.failback_steps),
            min_step_pct=limits.min_step_pct,
            target_utilisation=limits.target_utilisation,
            slo_ttft_p99_ms=spec.slo.ttft_p99_ms,
            slo_error_rate=spec.slo.error_rate,
            backoff_s=max(30.0, 3 * spec.interval_s),
        )
