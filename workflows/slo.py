"""RTO to the objective, as an operation measures it once traffic has moved: "SLO restored".

A failover (and a rebalance) starts a `SloWatch` once traffic is verified: the target region's worker
reads the target's replicas until TTFT p99 and error rate are within `objectives.slo`, held for
its window (activities/slo.py, drctl/models/slo.py). The wait is bounded by the RTO target plus
the window from the fault, so an operation never hangs on a target that stays slow; it then
reports why, e.g. "not restored within 30s: ttft_p99 412 ms > 200 ms at 39.0s".
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl.models.fleet_spec import FleetSpec
    from drctl.models.slo import SloObjective, SloWatchInput, SloWatchResult, observe_until_s
    from workflows import calls
    from workflows.common import Phases
    from workflows.operation import cause_of

# Before this patch a failover ended at its verification; with it, it also reports "SLO restored".
# The rebalance starts a SloWatch the same way once its shift is in effect.
PATCH = "failover-slo-restored"
PHASE = "slo"
# Start-up and the last read's timeouts, beyond the watch's own bound.
SLACK_S = 15.0


class SloWatch:
    """The watch, started as soon as traffic is verified on the target, so a failover that then
    scales the target (emergency) or waits for propagation reads it all along; `result` awaits it."""

    def __init__(self, spec: FleetSpec, target: str, fault_at: datetime, queue: str) -> None:
        self.inp = SloWatchInput(
            region=target,
            objective=SloObjective.from_config(spec.slo),
            fault_at=fault_at,
            within_s=spec.rto_target_s,
        )
        self.rto_target_s = spec.rto_target_s
        elapsed = (workflow.now() - fault_at).total_seconds()
        # What the activity may still take (models.slo.observe_until_s), and never less than one window.
        self.left_s = max(
            observe_until_s(self.inp) - elapsed, self.inp.objective.window_s + self.inp.interval_s
        )
        self.task = asyncio.ensure_future(self._watch(queue))

    async def _watch(self, queue: str) -> SloWatchResult | str:
        """The result, or why there is none: never raises, so nothing is left unawaited on a failure."""
        try:
            return await calls.watch_slo(
                self.inp,
                queue=queue,
                bound_s=self.left_s + SLACK_S,
                summary=f"SLO restored in {self.inp.region}?",
            )
        except (ActivityError, ApplicationError) as exc:
            return f"not measured: {cause_of(exc)}"

    async def result(self, phases: Phases) -> tuple[SloWatchResult | None, str]:
        """(the watch's result, or None when it could not run; a one-line summary for the operation)."""
        obj = self.inp.objective
        # Entered even when the watch is already done, so the phase list reads the same either way.
        phases.enter(
            PHASE,
            f"waiting for `{self.inp.region}` to hold TTFT p99 <= {obj.ttft_p99_ms:g} ms and errors <= "
            f"{obj.error_rate:.1%} for {obj.window_s:g}s",
        )
        res = await self.task
        text = res if isinstance(res, str) else res.summary(self.rto_target_s)
        phases.note("SLO", text)
        return (None if isinstance(res, str) else res), text
