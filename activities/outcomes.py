"""`record_outcome`: count a finished failover or failback, and its measured RTO, in the metrics.

The workflow calls it once, at its end. Workflow code cannot count anything itself: it is
replayed, and a replayed counter would count the same failover again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from temporalio import activity

from drctl.config.schema import FleetConfig
from drctl.models.outcome import OutcomeInput
from drctl.telemetry import metrics


@activity.defn(name="record_outcome")
async def record_outcome(inp: OutcomeInput) -> None:
    if inp.operation == "failover":
        metrics.record_failover(inp.fleet, inp.result, inp.rto_s, inp.rto_target_s, time.time())
    else:
        metrics.record_failback(inp.fleet, inp.result)


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return [record_outcome]
