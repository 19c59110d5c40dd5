"""The decision core's input: facts about each region and the fleet, with no judgement in them.

The probe adapter, the passive reader, the vantage points and the capacity reader fill these in;
drctl/decision/verdict.py is the one place that turns them into a region's verdict.
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Vote = Literal["up", "down", "unknown"]
OperationKind = Literal["failover", "failback", "rebalance", "return", "maintenance", "break_glass"]


class Verdict(str, Enum):
    """A region's state as the core judges it (docs/decisions.md, Verdicts)."""

    HEALTHY = "HEALTHY"
    DEGRADED = "DEGRADED"
    SATURATED = "SATURATED"
    DOWN = "DOWN"
    RECOVERING = "RECOVERING"
    UNKNOWN = "UNKNOWN"


class _Facts(BaseModel):
    # Unknown keys are a caller's typo, not a fact to ignore.
    model_config = ConfigDict(extra="forbid")


class ProbeFacts(_Facts):
    """What one active probe of a region saw. No status: the verdict is the core's."""

    answered: bool = Field(description="The gateway was reachable and gave an HTTP answer.")
    auth_refused: bool = Field(False, description="The gateway refused the probe's credentials (401/403).")
    completions_ok: int = Field(0, ge=0, description="1-token completions answered.")
    completions_tried: int = Field(0, ge=0, description="1-token completions sent.")
    errors: list[str] = Field(default_factory=list, description="Error classes seen, e.g. 'timeout', '503'.")
    ttft_ms: float | None = Field(
        None, ge=0, description="Time to first token of the gateway's completion, ms."
    )
    replicas_failing: list[str] = Field(
        default_factory=list, description="Ready replicas that failed their checks (loading ones never)."
    )
    replicas_late_only: list[str] = Field(
        default_factory=list,
        description="Of replicas_failing, those failed only by a late or missing first token.",
    )
    queue_waiting: float | None = Field(None, ge=0, description="Requests waiting in the replicas' queues.")
    finished_total: float | None = Field(
        None, ge=0, description="Requests the replicas have finished in all (a counter: progress)."
    )
    at: datetime = Field(description="When the probe ran.")


class PassiveFacts(_Facts):
    """The region's own traffic, read from counters and histograms."""

    error_rate: float | None = Field(None, ge=0, le=1, description="Failed share of requests in the window.")
    ttft_p99_ms: float | None = Field(None, ge=0, description="TTFT at the 99th percentile, ms.")
    requests: float | None = Field(None, ge=0, description="Requests in the window.")
    stalled: bool = Field(False, description="Requests are in flight but none finished in the window.")


class CapacityFacts(_Facts):
    """Replicas, capacity and load of a region, in one load unit (e.g. concurrent streams)."""

    ready: int = Field(ge=0, description="Replicas ready and serving.")
    loading: int = Field(0, ge=0, description="Replicas not ready yet (loading weights): capacity coming.")
    desired: int = Field(ge=0, description="Replicas the region should run.")
    per_replica: float | None = Field(None, gt=0, description="Capacity of one replica, load units.")
    load: float | None = Field(None, ge=0, description="Offered load, load units.")
    ttft_p99_ms: float | None = Field(None, ge=0, description="Server-side TTFT p99, ms.")
    error_rate: float | None = Field(None, ge=0, le=1, description="Server-side failed share of requests.")
    waiting: float | None = Field(None, ge=0, description="Requests waiting in the replicas' queues.")


class RegionEvidence(_Facts):
    """Everything observed about one region at one tick."""

    name: str = Field(min_length=1, description="The region's configured name.")
    home_weight: int = Field(ge=0, le=100, description="The region's configured global weight.")
    probe: ProbeFacts | None = Field(None, description="This tick's active probe; None: no probe this tick.")
    passive: PassiveFacts | None = Field(None, description="Passive signals; None: none read.")
    votes: dict[str, Vote] = Field(
        default_factory=dict, description="Vantage point -> its view of the region."
    )
    capacity: CapacityFacts | None = Field(None, description="Replicas, capacity and load; None: unknown.")


class Operation(_Facts):
    """An operation in flight on the fleet."""

    kind: OperationKind = Field(description="What the operation does.")
    source: str | None = Field(None, description="The region traffic leaves.")
    target: str | None = Field(None, description="The region traffic goes to.")
    started_at: datetime = Field(description="When it started.")
    by: str = Field("monitor", description="'monitor' or the operator who started it.")


class FleetEvidence(_Facts):
    """The core's whole input at one tick."""

    at: datetime = Field(description="When the evidence was gathered.")
    regions: dict[str, RegionEvidence] = Field(description="Region name -> its evidence (2..N regions).")
    weights_in_effect: dict[str, int] | None = Field(
        None, description="Weights read from the global tier; None: unreadable."
    )
    weights_applied: dict[str, int] | None = Field(
        None, description="Weights drctl last wrote; None: never written (home weights stand)."
    )
    loads_steady: bool = Field(
        True,
        description="The weights in effect stayed the same through the window the capacity loads were "
        "read over. False when they changed within it (a write landing, a tier restart): those loads mix "
        "two weightings and say nothing of the load one weight point brings.",
    )
    operations: list[Operation] = Field(default_factory=list, description="Operations in flight.")
