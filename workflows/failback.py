"""Failback (`failback/<fleet>`): stabilise, then step back to the configured weights with analysis.

Each step is checked with a real probe of the regions gaining traffic; a regression rolls back
one step and ends the failback (the monitor tries again after another stabilisation window).
A failover preempts a failback (docs/lock.md): the failback stops before its next weight change,
leaves the weights to the failover and ends `preempted`.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from drctl.models import fleet_spec
    from drctl.models import search_attributes as sa
    from drctl.models.activity_io import ProbeRequest, RegionRequest, ScaleInput
    from drctl.models.failover import FailbackInput, FailbackResult, failback_plan, probe_passes
    from drctl.models.gitops import note_all
    from drctl.models.health import RegionProbe
    from drctl.models.lock import SIGNAL_PREEMPT, PreemptNotice
    from workflows import calls, global_weights
    from workflows.common import fmt_weights
    from workflows.operation import Operation, cause_of
    from workflows.telemetry import record_outcome

PHASE_STABILIZE = "stabilize"
PHASE_SCALE_BACK = "scale-back"


@workflow.defn(name="Failback")
class Failback(Operation):
    OPERATION, TITLE = "failback", "Failback"

    @workflow.init
    def __init__(self, inp: FailbackInput) -> None:
        super().__init__()
        self.preempted: str | None = None

    @workflow.signal(name=SIGNAL_PREEMPT)
    def preempt(self, notice: PreemptNotice) -> None:
        # A failover took the fleet: the weights are its own from now on.
        self.preempted = notice.reason
        self.phases.note("preempted", notice.reason)

    def _yielded(self, res: FailbackResult) -> bool:
        """Whether a failover preempted us; if so the result says so (checked before every weight change)."""
        if self.preempted is None:
            return False
        res.status, res.error = "preempted", f"yielded: {self.preempted}"
        return True

    def abort_refused(self) -> str | None:
        # Each step is probed and a regression rolls back by itself; stopping between steps would
        # leave traffic split with nobody watching it.
        return "a failback cannot be aborted: it rolls back by itself when a step regresses"

    @workflow.run
    async def run(self, inp: FailbackInput) -> FailbackResult:
        async def recorded(res: FailbackResult) -> None:
            await record_outcome("failback", inp.spec.fleet, res.status, None, inp.spec.rto_target_s)

        return await self.conclude(
            self._run(inp),
            lambda res: (
                None
                if res.status in ("succeeded", "not_needed")
                else f"failback {res.status}: {res.error or ''}".strip()
            ),
            recorded,
        )

    async def _run(self, inp: FailbackInput) -> FailbackResult:
        spec = inp.spec
        self.phases.title = f"Failback of fleet `{spec.fleet}`"
        res = FailbackResult(status="failed")
        try:
            await self.claim(spec.fleet)
            # Read on the main queue first only to learn which region gains traffic; every change
            # is then made on that region's queue, which must be alive for the failback to make sense.
            current = (await calls.get_global_weights()).weights
            res.weights_before = dict(current)
            configured = spec.weights
            gaining = [r for r, w in configured.items() if w > current.get(r, 0)]
            if inp.region and inp.region not in gaining and current != configured:
                gaining.insert(0, inp.region)
            if gaining:
                workflow.upsert_search_attributes([sa.TARGET_REGION.value_set(gaining[0])])
            if current != configured:
                await self._stabilize(inp, gaining)
                await self._steps(inp, current, configured, gaining, res)
            else:
                res.status = "not_needed"
            if res.status in ("succeeded", "not_needed") and not self._yielded(res):
                await self._scale_back(inp, res)
                res.weights_after = res.weights_after or current
            return await self._end(res, ok=res.status not in ("rolled_back", "preempted"))
        except (ActivityError, ApplicationError) as exc:
            res.error = cause_of(exc)
            return await self._end(res, ok=False)

    async def _probe(self, spec: fleet_spec.FleetSpec, regions: list[str]) -> list[RegionProbe]:
        batch = await calls.probe_regions(
            ProbeRequest(regions=regions),
            probe_timeout_s=spec.probe_timeout_s,
            summary=f"probe {', '.join(regions)}",
        )
        return batch.probes

    async def _stabilize(self, inp: FailbackInput, regions: list[str]) -> None:
        spec = inp.spec
        window = (
            spec.stabilization_window_s if inp.stabilization_window_s is None else inp.stabilization_window_s
        )
        if not regions:
            return
        self.phases.enter(PHASE_STABILIZE, f"{', '.join(regions)} must stay healthy for {window:g} s")
        if window <= 0:
            # The caller watched the window already; still never hand traffic to a failing region.
            failing = [
                p for p in await self._probe(spec, regions) if not probe_passes(p, spec.fail_on_degraded)
            ]
            if failing:
                raise ApplicationError(
                    "; ".join(f"{p.region} is {p.status.value}: {p.reason}" for p in failing),
                    type="NotHealthy",
                )
            return
        # Bounded: a region that keeps flapping ends the failback instead of holding the fleet forever.
        # A probe whose worker died is retried only when its timeout expires: allow one such loss,
        # or a worker restart during a short window fails the failback as "not stable".
        deadline = workflow.now() + timedelta(
            seconds=window * 4 + spec.interval_s * 3 + calls.probe_attempt_s(spec.probe_timeout_s)
        )
        healthy_since = None
        while workflow.now() < deadline and self.preempted is None:
            probes = await self._probe(spec, regions)
            if all(probe_passes(p, spec.fail_on_degraded) for p in probes):
                healthy_since = healthy_since or workflow.now()
                if (workflow.now() - healthy_since).total_seconds() >= window:
                    return
            else:
                healthy_since = None
            try:
                await workflow.wait_condition(
                    lambda: self.preempted is not None,
                    timeout=timedelta(seconds=min(spec.interval_s, window)),
                )
            except TimeoutError:
                pass
        if self.preempted is not None:
            return
        raise ApplicationError(
            f"{', '.join(regions)} did not stay healthy for {window:g} s", type="NotStable"
        )

    async def _steps(
        self,
        inp: FailbackInput,
        current: dict[str, int],
        configured: dict[str, int],
        gaining: list[str],
        res: FailbackResult,
    ) -> None:
        spec = inp.spec
        tq = spec.region(gaining[0]).queue if gaining else spec.task_queue
        plan = failback_plan(current, configured, spec.failback_steps)
        res.steps_planned = len(plan)
        previous = current

        async def move(weights: dict[str, int], reason: str, summary: str) -> None:
            change = await global_weights.apply_and_wait(
                tq, weights, reason, summary, spec.global_propagation_timeout_s
            )
            res.changes.append(change)
            res.weights_after = change.weights

        for i, step in enumerate(plan, 1):
            if self._yielded(res):
                return
            self.phases.enter(f"step-{i}-of-{len(plan)}", f"weights {fmt_weights(step)}")
            # Each step waits until it is in effect everywhere: the analysis below must judge traffic
            # that has moved, and the next change must not pile onto a PENDING one.
            await move(step, f"failback step {i}/{len(plan)}", f"failback step {i}: {fmt_weights(step)}")
            if spec.failback_step_interval_s > 0:
                try:
                    await workflow.wait_condition(
                        lambda: self.preempted is not None,
                        timeout=timedelta(seconds=spec.failback_step_interval_s),
                    )
                except TimeoutError:
                    pass
            if self._yielded(res):
                return  # the failover owns the weights now: no analysis, no rollback
            probes = await self._probe(spec, gaining) if gaining else []
            failing = [p for p in probes if not probe_passes(p, spec.fail_on_degraded)]
            if failing:
                why = "; ".join(f"{p.region} {p.status.value}: {p.reason}" for p in failing)
                self.phases.note("regression", why)
                await move(previous, f"failback rollback: {why}", f"roll back to {fmt_weights(previous)}")
                res.status, res.error = "rolled_back", f"step {i} regressed ({why}); rolled back one step"
                return
            res.steps_done = i
            previous = step
        res.status = "succeeded"

    async def _scale_back(self, inp: FailbackInput, res: FailbackResult) -> None:
        spec = inp.spec
        self.phases.enter(PHASE_SCALE_BACK, "returning pre-scaled regions to their configured replicas")
        for r in spec.regions:
            cap = await calls.get_capacity(
                RegionRequest(region=r.name), queue=r.queue, summary=f"capacity of {r.name}"
            )
            if cap.replicas > r.replicas:
                scaled = await calls.scale_deployment(
                    ScaleInput(region=r.name, replicas=r.replicas),
                    queue=r.queue,
                    summary=f"scale {r.name} back to {r.replicas}",
                )
                res.scaled_back[r.name] = r.replicas
                note_all(res.gitops_managed, scaled.scale_changes())

    async def _end(self, res: FailbackResult, ok: bool) -> FailbackResult:
        await self.finish(
            res.status, f"{res.status}: {fmt_weights(res.weights_after)} {res.error or ''}", ok=ok
        )
        res.phases = list(self.phases.timings)
        return res


WORKFLOWS = [Failback]
