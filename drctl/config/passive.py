"""Fleet config for passive health signals (`health.passive`): thresholds and where signals come from.

Kept apart from drctl/config/schema.py so the detection settings read as one unit. The defaults are
documented in docs/configuration.md (Passive signals).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from drctl.config.strict import HttpUrl, StrictModel

_Model = StrictModel


class PrometheusSignals(_Model):
    url: HttpUrl = Field(
        ..., description="Prometheus HTTP API base URL, e.g. http://prometheus.monitoring:9090."
    )
    region_label: str = Field(
        "region",
        pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$",
        description="Label whose value is the region name on the vLLM series (added by relabelling or "
        "external_labels).",
    )
    selector: str = Field(
        "",
        description="Extra label matchers for every series, e.g. 'job=\"vllm\"' (no braces).",
        pattern=r"^[^{}\x00-\x1f\x7f]*$",
    )
    timeout_s: float = Field(2.0, gt=0, le=30, description="Timeout of one query, seconds.")


class PassiveConfig(_Model):
    enabled: bool = Field(True, description="Read passive signals; off leaves detection to the active probe.")
    source: Literal["direct", "prometheus"] = Field(
        "direct",
        description="direct: each region's gateway runtime socket (`show stat`) and every replica's /metrics; "
        "prometheus: queries over the same vLLM series (health.passive.prometheus).",
    )
    interval_s: float = Field(1.0, gt=0, le=60, description="Seconds between reads.")
    window_s: float = Field(
        3.0,
        gt=0,
        le=300,
        description="Window over which rates and TTFT quantiles are computed, s: long enough for min_requests at "
        "ordinary traffic, short enough that a breach shows within a second or two.",
    )
    max_error_rate: float = Field(
        0.2, gt=0, le=1, description="5xx fraction of the window's requests above which a region is SUSPECT."
    )
    max_ttft_p99_ms: float = Field(
        2000.0, gt=0, description="TTFT p99 over the window above which a region is SUSPECT, ms."
    )
    min_requests: int = Field(
        10,
        ge=1,
        le=1_000_000,
        description="Fewer requests than this in the window give no signal: the active probe alone decides.",
    )
    confirm_probes: int = Field(
        1,
        ge=1,
        le=10,
        description="While a region breaches these limits, this many failed active probes in a row make it "
        "UNHEALTHY (health.failure_threshold otherwise, if lower): two independent signals agreeing.",
    )
    max_age_s: float = Field(
        3.0, gt=0, le=600, description="A read older than this counts as missing, never as healthy, s."
    )
    backends: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,64}$")]] | None = Field(
        None, description="Gateway backends read with `show stat`; default the regional tier's backend."
    )
    prometheus: PrometheusSignals | None = Field(None, description="Where source 'prometheus' queries.")

    @model_validator(mode="after")
    def _consistent(self) -> PassiveConfig:
        if self.source == "prometheus" and self.prometheus is None:
            raise ValueError("source 'prometheus' needs health.passive.prometheus.url")
        if self.interval_s >= self.window_s:
            raise ValueError(
                f"window_s ({self.window_s:g}) must be longer than interval_s ({self.interval_s:g}): "
                "a window needs at least two reads"
            )
        if self.max_age_s < self.interval_s:
            raise ValueError(
                f"max_age_s ({self.max_age_s:g}) must be at least interval_s ({self.interval_s:g}), "
                "or every read would count as missing before the next one"
            )
        return self
