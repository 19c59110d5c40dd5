"""Fleet config for the quorum of vantage points (`health.quorum`): who must agree before a failover.

Kept apart from drctl/config/schema.py so the setting reads as one unit. The defaults are documented in
docs/configuration.md (A quorum of vantage points).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from drctl.config.strict import StrictModel


class QuorumConfig(StrictModel):
    mode: Literal["majority", "off"] = Field(
        "majority",
        description="majority: before an automatic failover of region X, the workers of every other region probe X "
        "too, and X fails over only when more than half of all vantage points (the monitor's own probe and each "
        "other region's worker) see it down; off: the monitor's own probe alone decides.",
    )
    vantage_timeout_s: float = Field(
        3.0,
        gt=0,
        le=60,
        description="How long a vote waits for a region's worker to pick up its probe; a worker that does not "
        "is a missing vote, s.",
    )
    max_age_s: float = Field(
        5.0,
        gt=0,
        le=600,
        description="A vantage point's probe older than this when it reaches the monitor (its probed_at against "
        "the monitor's clock) is a missing vote, never a healthy one, s.",
    )
