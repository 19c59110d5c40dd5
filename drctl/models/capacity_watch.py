"""The rebalance's quiet wait: one region's capacity signals read inside an activity, returned only
on a transition.

Pure. At rest (every region within its capacity and the objective, nothing being timed) the
monitor's rebalance does not tick every `health.interval_s`: each tick is an activity per region
plus the weights' read, some 15 history events, 3,600 per region-hour on two regions. Instead it
starts one `watch_capacity` activity per serving region, on the region's own queue, which reads the
same signals every interval and returns only when `transition` names something the rule must see:
- a breach of capacity or the objective (`drctl/models/capacity.py::breaches`): load over usable
  capacity, TTFT p99 or the error rate over the objective;
- ready or desired replicas changed (a replica lost or added, a scale);
- the capacity became known or unknown (a slot ceiling learned, or the replicas unreadable);
or after `return_after_s` (the checkpoint: one ordinary tick). The rebalance then ticks as before.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from drctl.config.capacity import SloConfig
from drctl.models.capacity import CapacitySpec, RegionSignals, breaches, region_capacity
from drctl.models.capacity_sample import CapacitySample


class CapacityWatchInput(BaseModel):
    """What the region looked like at the tick that went quiet, and the rule's settings."""

    region: str
    previous: CapacitySample | None = Field(None, description="The tick's sample: the first window's start.")
    max_window_s: float = Field(60.0, gt=0, description="As CapacityReadInput.max_window_s.")
    interval_s: float = Field(gt=0, description="Seconds between two readings (health.interval_s).")
    return_after_s: float = Field(gt=0, description="The checkpoint: return after this long regardless.")
    spec: CapacitySpec
    slo: SloConfig
    min_requests: int = Field(1, ge=1, description="An error rate over fewer requests says nothing.")
    ceiling: float | None = Field(None, description="The learned slot ceiling the fleet has seen.")
    ready_replicas: int = Field(ge=0, description="Ready replicas at the tick.")
    desired_replicas: int = Field(ge=0, description="Desired replicas at the tick.")
    known: bool = Field(description="Whether the tick knew the region's capacity and load.")


class CapacityWatchResult(BaseModel):
    reason: Literal["transition", "checkpoint"]
    why: list[str] = Field(default_factory=list, description="What changed, one line each.")
    reads: int = Field(0, ge=0, description="Readings taken.")
    baseline: CapacitySample | None = Field(
        None,
        description="The start of the last reading's window: the next tick reads from here, so its "
        "window spans a whole interval and still holds what the watch saw.",
    )


def transition(inp: CapacityWatchInput, sig: RegionSignals) -> list[str]:
    """What the rebalance must see in this reading, one line each; empty: still at rest."""
    cap = region_capacity(sig, inp.spec, known_ceiling=inp.ceiling)
    out = list(breaches(cap, inp.slo, min_requests=inp.min_requests).values())
    if (sig.ready_replicas, sig.desired_replicas) != (inp.ready_replicas, inp.desired_replicas):
        out.append(
            f"{inp.region} replicas ready/desired {inp.ready_replicas}/{inp.desired_replicas} -> "
            f"{sig.ready_replicas}/{sig.desired_replicas}"
        )
    if cap.known != inp.known:
        out.append(f"{inp.region} capacity {'now known' if cap.known else 'no longer known'}")
    return out
