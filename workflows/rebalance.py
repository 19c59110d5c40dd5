"""Rebalance (`rebalance/<fleet>`): one step of a partial shed or return of share, planned by the monitor.

The monitor (workflows/monitor_rebalance.py) plans each step from the regions' capacity and the
objective; this operation applies it under the fleet lock, so it never races a failover, failback
or upgrade, and a failover preempts it (docs/lock.md):
1. claim the lock; a busy fleet ends the step as `failed` with the holder named, and the monitor
   decides again on its next tick;
2. read the global weights: if they are no longer the ones the step was planned from (an operator
   or another operation moved them), nothing is changed (`stale`);
3. pre-scale the regions gaining share where they can scale (Deployment replicas and HPA
   minReplicas, the failover's own `scale_deployment`), beside step 4: the shift does not wait for
   the new replicas, since the plan places only what the ready replicas' headroom carries, and the
   added replicas show as headroom on later ticks. A failed pre-scale is named in the result
   (`prescale_errors`) and leaves the shift standing;
4. shift the global weights (the failover's traffic activities) and wait until they are in effect;
5. a return step is analysed as a failback step is: after `return_step_interval_s` the regions
   gaining share are probed, and a regression rolls the step back (`rolled_back`);
6. the return step that gives back the last share moved scales the regions earlier steps
   pre-scaled back to their configured replicas (`scale_back`, as a failback does).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl.models.activity_io import ProbeRequest, RegionRequest, ScaleInput
    from drctl.models.failover import probe_passes
    from drctl.models.fleet_spec import FleetSpec
    from drctl.models.gitops import note_all
    from drctl.models.lock import SIGNAL_PREEMPT, PreemptNotice
    from drctl.models.rebalance import RebalanceInput, RebalanceResult
    from workflows import calls, global_weights
    from workflows.common import fmt_weights
    from workflows.operation import Operation, cause_of, no_worker

PHASE_READ = "read-weights"
PHASE_PRESCALE = "pre-scale"
PHASE_ANALYSE = "analyse"
PHASE_SCALE_BACK = "scale-back"


@workflow.defn(name="Rebalance")
class Rebalance(Operation):
    OPERATION, TITLE = "rebalance", "Rebalance"

    def __init__(self) -> None:
        super().__init__()
        self.preempted: str | None = None

    def abort_refused(self) -> str | None:
        # One step, seconds long; stopping half-way would leave it to nobody. The monitor's
        # `failover.rebalance: off` (or `drctl monitor pause`) stops further steps.
        return "a rebalance step cannot be aborted; set failover.rebalance to off to stop further steps"

    @workflow.signal(name=SIGNAL_PREEMPT)
    def preempt(self, notice: PreemptNotice) -> None:
        self.preempted = notice.reason

    @workflow.run
    async def run(self, inp: RebalanceInput) -> RebalanceResult:
        return await self.conclude(
            self._run(inp),
            lambda res: (
                None if res.status in ("succeeded", "stale") else f"rebalance {res.status}: {res.error}"
            ),
        )

    async def _run(self, inp: RebalanceInput) -> RebalanceResult:
        spec = inp.spec
        res = RebalanceResult(status="failed", action=inp.action)
        self.phases.title = f"Rebalance of fleet `{spec.fleet}` ({inp.action}): {inp.reason}"
        gaining = inp.gaining
        tq = spec.region(gaining[0]).queue if gaining else spec.task_queue
        try:
            await self.claim(spec.fleet)
            self.phases.enter(PHASE_READ, f"planned from {fmt_weights(inp.weights_before)}")
            current = (await calls.get_global_weights()).weights
            res.weights_before = res.weights_after = dict(current)
            if current != inp.weights_before:
                res.status = "stale"
                res.error = (
                    f"weights are {fmt_weights(current)}, not {fmt_weights(inp.weights_before)} as planned"
                )
                return await self._end(res, ok=True)
            # Beside the shift, not before it: the shift is sized to the ready replicas' headroom, and
            # new replicas take far longer to be ready than the shift takes, so waiting would only
            # delay the shed by the scale's round trips.
            want = {r: n for r, n in inp.prescale.items() if r in inp.gaining}
            if want:
                self.phases.enter(PHASE_PRESCALE, ", ".join(f"{r} to {n}" for r, n in want.items()))
            prescale = asyncio.ensure_future(self._prescale(inp.spec, want, res))
            try:
                if self.preempted is None:
                    await self._shift(
                        inp, tq, inp.weights_after, f"rebalance {inp.action}: {inp.reason}", res
                    )
            finally:
                await prescale  # what was scaled is in the result, whether the shift went through or not
            if inp.action == "return" and self.preempted is None:
                await self._analyse(inp, tq, res)
                if res.status == "succeeded" and inp.scale_back and self.preempted is None:
                    await self._scale_back(inp.spec, inp.scale_back, res)
            else:
                res.status = "succeeded"
            if self.preempted is not None:
                res.status, res.error = "preempted", f"yielded: {self.preempted}"
            return await self._end(res, ok=res.status == "succeeded")
        except (ActivityError, ApplicationError) as exc:
            res.error = no_worker(exc, tq) or cause_of(exc)
            return await self._end(res, ok=False)

    async def _prescale(self, spec: FleetSpec, want: dict[str, int], res: RebalanceResult) -> None:
        for region, n in want.items():
            # The shift stands on the ready replicas alone: a failed pre-scale is said, not undone.
            got, why = await self._scale(
                spec, region, n, res, up=True, what="pre-scale", summary=f"pre-scale {region} to {n}"
            )
            if why is not None:
                res.prescale_errors[region] = why
            elif got is not None:
                res.scaled[region] = got

    async def _scale_back(self, spec: FleetSpec, want: dict[str, int], res: RebalanceResult) -> None:
        """The last share is back: the regions earlier steps pre-scaled return to their replicas
        (as a failback scales back). A failure is named, never undone: the weights are home."""
        self.phases.enter(PHASE_SCALE_BACK, ", ".join(f"{r} to {n}" for r, n in want.items()))
        for region, n in want.items():
            got, why = await self._scale(
                spec, region, n, res, up=False, what="scale-back", summary=f"scale {region} back to {n}"
            )
            if why is not None:
                res.scale_back_errors[region] = why
            elif got is not None:
                res.scaled_back[region] = n

    async def _scale(
        self, spec: FleetSpec, region: str, n: int, res: RebalanceResult, *, up: bool, what: str, summary: str
    ) -> tuple[int | None, str | None]:
        """`region`'s serving Deployment to `n` replicas if it runs fewer (`up`) or more: (replicas set,
        None), (None, None) when it is already there (an HPA, an operator or an earlier step), or
        (None, why) when it failed."""
        q = spec.region(region).queue
        try:
            cap = await calls.get_capacity(
                RegionRequest(region=region), queue=q, summary=f"capacity of {region}"
            )
            if (n <= cap.replicas) if up else (cap.replicas <= n):
                return None, None
            scaled = await calls.scale_deployment(
                ScaleInput(region=region, replicas=n), queue=q, summary=summary
            )
        except ActivityError as exc:
            why = no_worker(exc, q) or cause_of(exc)
            self.phases.note(f"{what} failed", f"{region}: {why}")
            return None, why
        note_all(res.gitops_managed, scaled.scale_changes())
        return scaled.replicas, None

    async def _shift(
        self, inp: RebalanceInput, tq: str, weights: dict[str, int], reason: str, res: RebalanceResult
    ) -> None:
        self.phases.enter("shift", f"global weights {fmt_weights(weights)}")
        # In effect everywhere before the step ends: the monitor's next plan, and a return step's
        # analysis, must judge traffic that has moved.
        change = await global_weights.apply_and_wait(
            tq, weights, reason, f"rebalance: {fmt_weights(weights)}", inp.spec.global_propagation_timeout_s
        )
        res.changes.append(change)
        res.weights_after = change.weights

    async def _analyse(self, inp: RebalanceInput, tq: str, res: RebalanceResult) -> None:
        """As a failback step: wait, probe the regions that regained share, roll back on a regression."""
        spec = inp.spec
        interval = spec.rebalance_limits.return_step_interval_s
        self.phases.enter(PHASE_ANALYSE, f"probing {', '.join(inp.gaining)} after {interval:g} s")
        if interval > 0:
            try:
                # A failover preempting us must not wait out the analysis window.
                await workflow.wait_condition(
                    lambda: self.preempted is not None, timeout=timedelta(seconds=interval)
                )
            except TimeoutError:
                pass
        if self.preempted is not None:
            return  # the failover owns the weights now: neither judged nor rolled back
        batch = await calls.probe_regions(
            ProbeRequest(regions=inp.gaining),
            probe_timeout_s=spec.probe_timeout_s,
            summary=f"probe {', '.join(inp.gaining)}",
        )
        res.analysis = [f"{p.region} {p.status.value}: {p.reason}" for p in batch.probes]
        failing = [p for p in batch.probes if not probe_passes(p, spec.fail_on_degraded)]
        if not failing:
            res.status = "succeeded"
            return
        why = "; ".join(f"{p.region} {p.status.value}: {p.reason}" for p in failing)
        self.phases.note("regression", why)
        await self._shift(inp, tq, inp.weights_before, f"rebalance return rolled back: {why}", res)
        res.status, res.error = "rolled_back", f"the return step regressed ({why}); rolled back"

    async def _end(self, res: RebalanceResult, ok: bool) -> RebalanceResult:
        moved = f"{fmt_weights(res.weights_before)} → {fmt_weights(res.weights_after)}"
        await self.finish(res.status, f"{res.action} {res.status}: {moved}; {res.error or 'no error'}", ok=ok)
        res.phases = list(self.phases.timings)
        return res


WORKFLOWS = [Rebalance]
