"""Clearing drill faults outside `chaos run`: by the drill workflow, and by a sweep at worker start.

A worker SIGKILLed mid-drill takes the experiment activity with it, and maybe `chaos run` and its
rollbacks too. The drill workflow then sees the activity fail (heartbeat timeout) and clears the
target region itself (`drill_clear_faults`). If the workflow is gone as well (terminated, or timed
out), `sweep_orphan_faults` at the next worker start clears every fault whose owner marker names a
drill that is no longer running (drctl/chaos/faults.py records the markers).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from activities.defined import activity_methods
from drctl.chaos.faults import clear_region, owners, still_injected
from drctl.config.schema import FleetConfig
from drctl.models.drill import ClearFaultsInput, ClearFaultsResult

log = logging.getLogger("drctl.worker")
_SWEEP_TIMEOUT_S = 30.0


class DrillFaultActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg

    @activity.defn(name="drill_clear_faults")
    def clear_faults(self, inp: ClearFaultsInput) -> ClearFaultsResult:
        """Undo the drill's faults in its target region, then read the region back (idempotent).

        `cleared` is True only when the read-back finds nothing held; what it still finds is named in
        `still_injected`, so the drill can end Failed saying what is left.
        """
        if inp.region not in self.cfg.drills.allowed_targets:
            # Every drill action refuses such a region before touching it: no drill fault is there.
            return ClearFaultsResult(
                region=inp.region, cleared=True, detail="not an allowed drill target: nothing injected"
            )
        out = clear_region(self.cfg, inp.region)
        left = still_injected(self.cfg, inp.region)
        if left:
            activity.logger.warning(
                "drill %s: %s still holds %s after the clear", inp.workflow_id, inp.region, "; ".join(left)
            )
        else:
            activity.logger.info(
                "drill %s: faults in %s cleared (%s)", inp.workflow_id, inp.region, inp.reason
            )
        return ClearFaultsResult(
            region=inp.region,
            cleared=not left,
            detail=str(out.get("restored") or ""),
            still_injected=left,
        )


async def _running(client: Client, workflow_id: str) -> bool:
    if not workflow_id:
        return False
    try:
        desc = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return desc.status == WorkflowExecutionStatus.RUNNING


async def _sweep(client: Client, cfg: FleetConfig) -> list[str]:
    cleared: list[str] = []
    for region in cfg.drills.allowed_targets:
        held = await asyncio.to_thread(owners, cfg, region)
        orphans = [o for o in sorted(held) if not await _running(client, o)]
        if orphans:
            await asyncio.to_thread(clear_region, cfg, region)
            log.warning(
                "cleared drill faults in %s left by %s, which no longer run",
                region,
                ", ".join(o or "(unmarked)" for o in orphans),
            )
            cleared.append(region)
    return cleared


async def sweep_orphan_faults(client: Client, cfg: FleetConfig) -> list[str]:
    """Clear faults whose drill is no longer running; the regions cleared. Never fails the worker."""
    if not cfg.drills.allowed_targets:
        return []
    try:
        return await asyncio.wait_for(_sweep(client, cfg), timeout=_SWEEP_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - a region unreachable at start must not keep the worker down
        log.warning("drill fault sweep incomplete: %s", exc)
        return []


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(DrillFaultActivities(cfg))
