"""The in-workflow fleet guard: `claim_fleet`, and `running_operations` for workflows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from drctl.config import FleetConfig
from drctl.models.ops import FLEET_BUSY, ClaimInput, ClaimResult, OperationInfo, RunningOpsInput
from drctl.operations import compatible, list_operations, visibility_query
from drctl.temporal import ui_link


class OperationActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg

    async def _running(self, fleet: str) -> list[OperationInfo]:
        return await list_operations(activity.client(), fleet, visibility_query(fleet), self.cfg)

    @activity.defn(name="claim_fleet")
    async def claim_fleet(self, inp: ClaimInput) -> ClaimResult:
        """Fail with FleetBusy if an older incompatible operation runs on the fleet.

        The older operation wins, so two clients that both passed the client-side check end with
        exactly one operation running: the newer one sees the older one here and gives up.
        """
        others = [o for o in await self._running(inp.fleet) if o.workflow_id != inp.workflow_id]
        mine = (inp.started_at, inp.workflow_id)
        compatible_ops: list[OperationInfo] = []
        for op in others:
            if compatible(op.operation, inp.operation):
                compatible_ops.append(op)
                continue
            theirs = (op.start_time or inp.started_at, op.workflow_id)
            if theirs <= mine:
                raise ApplicationError(
                    f"fleet {inp.fleet!r} is busy: {op.operation} {op.workflow_id} is running "
                    f"(phase {op.phase or '?'}; {op.ui_link or ui_link(self.cfg, op.workflow_id)})",
                    op.model_dump(mode="json"),
                    type=FLEET_BUSY,
                    non_retryable=True,
                )
        return ClaimResult(claimed=True, compatible_running=compatible_ops)

    @activity.defn(name="running_operations")
    async def running_operations(self, inp: RunningOpsInput) -> list[OperationInfo]:
        return await self._running(inp.fleet)


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    acts = OperationActivities(cfg)
    return [acts.claim_fleet, acts.running_operations]
