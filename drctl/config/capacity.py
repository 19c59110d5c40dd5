"""Fleet config for capacity- and SLO-aware traffic: the service objective (`objectives.slo`) and the
limits of a proportional rebalance (`failover.rebalance_limits`).

Kept apart from drctl/config/schema.py so each setting reads as one unit. What the monitor does with
them is in docs/rebalancing.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from drctl.config.strict import StrictModel

RebalanceMode = Literal["off", "advise", "automatic"]


class SloConfig(StrictModel):
    ttft_p99_ms: float = Field(
        200.0,
        gt=0,
        le=600_000,
        description="The objective for time to first token at the 99th percentile, measured at the servers "
        "(vLLM's time_to_first_token histogram), ms.",
    )
    error_rate: float = Field(
        0.01,
        ge=0,
        le=1,
        description="The share of failed requests the objective allows (0.01 is 1 %).",
    )
    window_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="A target counts as restored once its TTFT p99 and error rate have held within the "
        "objective this long under the moved load, s.",
    )


class RebalanceLimits(StrictModel):
    breach_window_s: float = Field(
        2.0,
        ge=0,
        le=600,
        description="A capacity shortfall or an SLO breach must last this long before share is shed, s.",
    )
    min_step_pct: int = Field(
        5, ge=1, le=100, description="A move of less share than this is not made (hysteresis on the step), %."
    )
    max_shift_pct: int = Field(50, ge=1, le=100, description="At most this much share moves in one step, %.")
    hysteresis_pct: int = Field(
        10,
        ge=0,
        le=100,
        description="Shed share returns only once the region's capacity exceeds what its configured share "
        "needs by this margin, %.",
    )
    target_utilisation: float = Field(
        0.8,
        gt=0,
        le=1,
        description="A region is given at most this fraction of its capacity; the rest is headroom. When the "
        "fleet as a whole carries more than that, every region is held to the same fraction of its own, "
        "never more than all of it.",
    )
    return_step_interval_s: float = Field(
        10.0, ge=0, le=3600, description="Pause and analysis time per step of the return, s."
    )
    shed_step_interval_s: float = Field(
        5.0,
        ge=0,
        le=600,
        description="After a shed step, the next shed waits this long, s: the moved requests, and those "
        "queued before the step, must show in the regions' load and TTFT before the next is planned.",
    )
    return_stable_s: float = Field(
        30.0,
        ge=0,
        le=3600,
        description="Shed share starts to return only once every reading for this long has said the "
        "region carries it (with the hysteresis margin) and no region breached, s: a reading's noise "
        "must not shed and return by turns.",
    )

    @model_validator(mode="after")
    def _steps(self) -> RebalanceLimits:
        if self.min_step_pct > self.max_shift_pct:
            raise ValueError("min_step_pct must not exceed max_shift_pct")
        return self
