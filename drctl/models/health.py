"""Health models shared by the probe provider, activities and workflows."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field


class ProbeStatus(str, Enum):
    HEALTHY = "HEALTHY"
    DEGRADED = "DEGRADED"  # answers, but slow or partly failing
    DOWN = "DOWN"  # does not answer usefully at all
    # Answers, but refuses our credentials (401/403): a drctl config error, not an outage. Its
    # health is unknown, so the monitor neither fails it over nor calls it healthy; it alerts.
    AUTH = "AUTH"


class RegionState(str, Enum):
    """The monitor's per-region state machine."""

    HEALTHY = "HEALTHY"
    SUSPECT = "SUSPECT"
    UNHEALTHY = "UNHEALTHY"
    RECOVERING = "RECOVERING"


class TargetProbe(BaseModel):
    """One probed endpoint: the region gateway or one replica."""

    target: str = Field(description="'gateway' or the replica name.")
    url: str
    status: ProbeStatus
    error_class: str | None = Field(
        None, description="timeout, connect, http_5xx, http_4xx, auth, bad_response, ..."
    )
    error: str | None = None
    latency_ms: float | None = Field(None, description="Wall time of the /health request.")
    ttft_ms: float | None = Field(None, description="Time to first token of a 1-token completion.")
    models_ok: bool | None = None
    queue_depth: float | None = Field(None, description="vllm:num_requests_waiting, where /metrics exists.")
    running: float | None = Field(None, description="vllm:num_requests_running.")
    kv_cache_usage: float | None = Field(
        None, description="vllm:kv_cache_usage_perc, or V0's gpu_cache_usage_perc (0..1)."
    )
    finished: float | None = Field(
        None, description="vllm:request_success_total: requests finished since the server started."
    )


class RegionProbe(BaseModel):
    region: str
    status: ProbeStatus
    reason: str = Field("", description="Why the status is what it is, in one line.")
    gateway: TargetProbe
    replicas: list[TargetProbe] = Field(default_factory=list)
    failing_fraction: float = Field(
        0.0, description="Fraction of ready replicas not HEALTHY (loading ones apart)."
    )
    loading: list[str] = Field(
        default_factory=list,
        description="Replicas their EndpointSlice lists as not ready (loading weights): capacity coming, "
        "not probed and never counted failing.",
    )
    ttft_p50_ms: float | None = None
    probed_at: str = Field("", description="ISO timestamp when the probe finished.")
    duration_ms: float = 0.0
