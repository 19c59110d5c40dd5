"""FleetMonitor (`monitor/<fleet>`): the endless probe loop, region state machines, auto failover.

All state lives in one MonitorState, carried across continue-as-new; the collaborators that start
children (`MonitorActions`), vote (`MonitorQuorum`) and run the watcher (`MonitorWatch`) are handed
it inside one `MonitorRun`. `drctl monitor start` against
a running monitor sends the current config through the `update_spec` update, applied between
rounds. Failover and Failback are started as children with parent_close_policy ABANDON: a monitor
continuing as new (or being stopped) must never cancel a failover half-way.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    CancelledError,
)

with workflow.unsafe.imports_passed_through():
    from drctl.models import search_attributes as sa
    from drctl.models.activity_io import ProbeRequest
    from drctl.models.breakglass import SIGNAL_IMPORTED, ImportInput, adopted
    from drctl.models.failover import SIGNAL_VERIFIED, FailoverVerified
    from drctl.models.health import ProbeStatus, RegionState
    from drctl.models.monitor import (
        ALL_REGIONS_UNHEALTHY,
        NO_FAILOVER_TARGET,
        PROBE_AUTH_REFUSED,
        REGION_UNRESOLVED,
        MonitorInput,
        MonitorState,
        MonitorStatus,
        PolicyUpdate,
        choose_target,
    )
    from drctl.models.monitor_config import SpecUpdate, apply_spec, spec_problems
    from drctl.models.monitor_decisions import DecisionsView
    from drctl.models.quorum import NO_QUORUM
    from drctl.models.safe_text import safe_markdown
    from drctl.models.saturation import judge_probe
    from workflows import calls
    from workflows.common import DETAIL_CHARS
    from workflows.monitor_actions import MonitorActions
    from workflows.monitor_quorum import MonitorQuorum
    from workflows.monitor_rebalance import MonitorRebalance
    from workflows.monitor_run import MonitorRun
    from workflows.monitor_tier import MonitorTier
    from workflows.monitor_watch import MonitorWatch
    from workflows.notify import Notifier

WATCHING = "watching"
# Behind patched(): a history recorded before it replays its saturated probes as failures.
SATURATION_PATCH = "monitor-saturation"
_ALERT_TEXT = {
    ALL_REGIONS_UNHEALTHY: "no region can take traffic; weights left unchanged",
    NO_FAILOVER_TARGET: "an unhealthy region has no healthy region to fail over to",
    REGION_UNRESOLVED: "the worker's config lacks regions this monitor watches; they are not probed",
    PROBE_AUTH_REFUSED: "replicas refuse drctl's token; check workload.auth",
    NO_QUORUM: "the monitor sees a region down but most other vantage points do not (or did not answer): not "
    "failed over, voting again after a back-off; with two regions the other region's worker must answer "
    "(`drctl failover --to` still works)",
}


@workflow.defn(name="FleetMonitor")
class FleetMonitor:
    @workflow.init
    def __init__(self, inp: MonitorInput) -> None:
        # Built here, not in run: a signal or query may arrive in the very first activation.
        self.live = MonitorRun(inp.state or MonitorState.initial(inp))
        self.applied: list[str] = []
        self.notes = Notifier(self.live.state.spec, alert=self.live.state.alert)
        self.actions = MonitorActions(self.live)
        self.quorum = MonitorQuorum(self.live, self.actions.failover)
        self.watch = MonitorWatch(self.live, self.notes, self._decide, self._details, self.quorum.vote_due)
        self.rebalance = MonitorRebalance(self.live, self.notes, self._details)
        self.tier = MonitorTier(self.live, self.notes, self._details, self._busy)

    # --- handlers ---------------------------------------------------------------------------------

    @workflow.query(name="status")
    def status(self) -> MonitorStatus:
        return MonitorStatus.of(self.live.state, self.live.active)

    @workflow.query(name="decisions")
    def decisions(self) -> DecisionsView:
        """The fleet's decision log: why traffic is where it is (`drctl monitor decisions`)."""
        return self.rebalance.view()

    @workflow.signal(name=SIGNAL_VERIFIED)
    def failover_verified(self, note: FailoverVerified) -> None:
        """One of our failovers has traffic verified on its target: it is done for the fleet."""
        self.live.verified[note.run_id] = note
        self.live.poke = True

    @workflow.signal(name=SIGNAL_IMPORTED)
    def operation_imported(self, inp: ImportInput) -> None:
        """A break-glass failover moved the weights without Temporal (`drctl failover-import`): the
        monitor adopts them as they are (it never re-asserts weights; the rebalance takes weights
        it did not set as its new home) and keeps the audit record in its decision log."""
        self.live.state.decisions.record(adopted(inp, workflow.now()))

    @workflow.signal
    def pause(self) -> None:
        self.live.state.paused = True
        self.live.poke = True

    @workflow.signal
    def resume(self) -> None:
        self.live.state.paused = False
        self.live.poke = True

    @workflow.update
    def set_policy(self, inp: PolicyUpdate) -> str:
        before = self.live.state.policy
        self.live.state.policy = inp.policy
        self.live.poke = True
        return f"policy {before} → {inp.policy}"

    @set_policy.validator
    def _validate_policy(self, inp: PolicyUpdate) -> None:
        if inp.policy not in ("automatic", "manual"):
            raise ValueError(f"policy must be automatic or manual, got {inp.policy!r}")

    @workflow.update
    async def update_spec(self, inp: SpecUpdate) -> list[str]:
        """Follow a changed config: applied between probe rounds (a safe point), then answered."""
        self.live.pending_spec = inp.spec
        self.live.poke = True
        await workflow.wait_condition(lambda: self.live.pending_spec is None)
        return self.applied

    @update_spec.validator
    def _validate_spec(self, inp: SpecUpdate) -> None:
        problems = spec_problems(self.live.state.spec, inp.spec)
        if problems:
            raise ValueError("; ".join(problems))

    def _apply_pending(self) -> None:
        run = self.live
        if run.pending_spec is None:
            return
        self.applied = apply_spec(run.state, run.pending_spec)
        self.notes.spec = run.state.spec  # webhooks follow the config too
        run.pending_spec = None
        self.rebalance.poke()  # a changed rebalance mode or limit is applied at once
        workflow.logger.info("monitor follows the changed config: %s", "; ".join(self.applied) or "no change")

    # --- loop -------------------------------------------------------------------------------------

    @workflow.run
    async def run(self, inp: MonitorInput) -> None:
        run, s = self.live, self.live.state
        s.iteration = 0
        workflow.upsert_search_attributes([sa.PHASE.value_set(WATCHING)])
        self.watch.shown_phase = WATCHING
        while True:
            round_start = workflow.now()
            self._apply_pending()
            if s.spec.rebalance != "off":
                self.rebalance.ensure_started()  # behind patched(): see workflows/monitor_rebalance.py
            self.tier.ensure_started()  # behind patched(): see workflows/monitor_tier.py
            # Behind patched(): histories recorded before the watcher replay the loop below unchanged.
            watcher = s.spec.watcher and workflow.patched("monitor-watcher")
            if watcher:
                await self.watch.cycle()
            elif not s.paused:
                await self._round()
            s.iteration += 1
            s.total_iterations += 1
            if watcher:
                self.watch.show()
            else:
                self._render()
            if (
                (s.iteration >= s.max_iterations or workflow.info().is_continue_as_new_suggested())
                and run.child is None
                and run.watching is None
            ):
                self._apply_pending()  # an update waiting for the next round must finish before continue-as-new
                await self.rebalance.stop()  # its running step ends first; the ticks resume in the next run
                await self.tier.stop()
                await self.notes.flush()
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(MonitorInput(spec=s.spec, max_iterations=s.max_iterations, state=s))
            if watcher:
                continue  # the watcher waited; no timer between its calls
            fast_confirm = s.spec.fast_confirm and any(
                t.state is RegionState.SUSPECT for t in s.trackers.values()
            )
            period = s.spec.fast_confirm_interval_s if fast_confirm else s.spec.interval_s
            left = period - (workflow.now() - round_start).total_seconds()
            run.poke = False
            if left > 0:
                try:
                    await workflow.wait_condition(lambda: run.poke, timeout=timedelta(seconds=left))
                except TimeoutError:
                    pass

    async def _round(self) -> None:
        s = self.live.state
        spec = s.spec
        try:
            batch = await calls.probe_regions(
                ProbeRequest(regions=spec.region_names),
                probe_timeout_s=spec.probe_timeout_s,
                summary="probe all regions",
            )
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                raise  # `drctl monitor stop` cancelled us mid-probe: stop, don't swallow it (sdk-python#620)
            # Our own probe machinery failing says nothing about the regions: never fail over on it.
            workflow.logger.warning("probe round failed, regions unchanged: %s", exc.cause or exc)
            return
        s.probe_rounds += 1
        now = workflow.now()
        if batch.unresolved != s.unresolved:
            for why in batch.unresolved.values():
                workflow.logger.error("%s: %s", REGION_UNRESOLVED, why)
        s.unresolved = batch.unresolved
        refused: list[str] = []
        for probe in batch.probes:
            t = s.trackers.get(probe.region)
            if t is None:
                continue
            t.record_probe(probe, now)
            if probe.status is ProbeStatus.AUTH:
                # The region answers but refuses drctl's token: a config error to fix, not an outage
                # to fail over from. Its state stays as it was; the alert below says why.
                refused.append(probe.region)
                continue
            was_saturated = t.saturated
            passed = judge_probe(
                t, probe, spec.fail_on_degraded, self._sheds_saturation(), spec.region(t.region).replicas
            )
            if t.saturated is not None and was_saturated is None:
                workflow.logger.info("region %s: %s; the rebalance sheds its excess", t.region, t.saturated)
            if t.observe(
                passed,
                now,
                spec.failure_threshold,
                spec.recovery_threshold,
            ):
                workflow.logger.info("region %s is now %s (%s)", t.region, t.state.value, probe.reason)
        self._decide()
        if refused and s.alert is None:
            s.alert = PROBE_AUTH_REFUSED
            workflow.logger.error(
                "%s: %s refuse drctl's credentials (workload.auth); their health is unknown",
                PROBE_AUTH_REFUSED,
                ", ".join(refused),
            )
        self.notes.monitor_alert(s)

    def _sheds_saturation(self) -> bool:
        """A saturated region is the rebalance's to shed when it is automatic (behind a patch: a
        history recorded before replays its saturated probes as failures)."""
        return self.live.state.spec.rebalance == "automatic" and workflow.patched(SATURATION_PATCH)

    def _decide(self) -> None:
        self.rebalance.note_states()
        run, s, quorum = self.live, self.live.state, self.quorum
        states = [t.state for name, t in s.trackers.items() if name not in s.unresolved]
        no_quorum = quorum.forget_votes() if s.votes else None
        s.alert = REGION_UNRESOLVED if s.unresolved else no_quorum
        # A region this worker cannot resolve is unknown, not unhealthy: with one, "every region is
        # unhealthy" would be a guess; the unhealthy region then has no target (NO_FAILOVER_TARGET).
        if (
            not s.unresolved
            and RegionState.UNHEALTHY in states
            and all(x in (RegionState.UNHEALTHY, RegionState.SUSPECT) for x in states)
        ):
            s.alert = ALL_REGIONS_UNHEALTHY
            workflow.logger.error(
                "%s: every region of fleet %s is unhealthy; traffic is left where it is",
                ALL_REGIONS_UNHEALTHY,
                s.spec.fleet,
            )
            return
        # A running failback does not hold decisions back: a region failing meanwhile is failed over at
        # once, and the failover preempts the failback (docs/lock.md).
        if s.policy != "automatic" or (run.child is not None and run.child_kind != "failback"):
            return
        quorum.early_votes()
        backing_off = s.next_failover_attempt_at is not None and workflow.now() < s.next_failover_attempt_at
        moved = {r.source for r in s.failed_over}
        for name, t in s.trackers.items():
            if t.state is RegionState.UNHEALTHY and name not in moved:
                target = choose_target(s, name, workflow.now())
                if target is None:
                    s.alert = NO_FAILOVER_TARGET
                    workflow.logger.error(
                        "%s: %s is unhealthy and no region can take its traffic", NO_FAILOVER_TARGET, name
                    )
                    return
                # The back-off guards against the same obstacle; a region not tried yet is a new chance.
                if backing_off and target in s.avoid_targets:
                    return
                if not quorum.on():
                    run.start_child("failover", asyncio.ensure_future(self.actions.failover(name, target)))
                elif quorum.vote_waits(name):
                    continue  # no quorum on this one yet: another UNHEALTHY region may still have one
                else:
                    run.start_child(
                        "failover", asyncio.ensure_future(quorum.vote_then_failover(name, target))
                    )
                return
        if backing_off or run.child is not None:
            return
        window = timedelta(seconds=s.spec.stabilization_window_s)
        for rec in s.failed_over:
            t = s.trackers[rec.source]  # apply_spec drops records of removed regions
            if t.state is RegionState.HEALTHY and t.since is not None and workflow.now() - t.since >= window:
                run.start_child("failback", asyncio.ensure_future(self.actions.failback(rec)))
                return

    def _busy(self) -> bool:
        """One of this monitor's own moves is under way: a failover or failback child, a failover
        still watching its objective, or a rebalance step."""
        run = self.live
        return run.child is not None or run.watching is not None or self.rebalance.stepping

    def _render(self) -> None:
        s = self.live.state
        phase = s.alert or ("paused" if s.paused else WATCHING)
        workflow.upsert_search_attributes([sa.PHASE.value_set(phase)])
        self._details()

    def _details(self) -> None:
        s = self.live.state
        rounds = f"{s.probe_rounds} probe rounds" + (
            " as of the watcher's last return" if s.spec.watcher else ""
        )
        lines = [
            f"## Fleet `{s.spec.fleet}` monitor",
            f"policy **{s.policy}**, {rounds}, turn {s.total_iterations}",
        ]
        if s.alert:
            lines.insert(1, f"# 🚨 {s.alert}: {_ALERT_TEXT.get(s.alert, '')}")
            lines += [f"- {safe_markdown(why, limit=DETAIL_CHARS)}" for why in s.unresolved.values()]
        lines.append("\n| region | state | fails | oks | last probe |\n|---|---|---|---|---|")
        for t in s.trackers.values():
            # The reason quotes what the region's server answered.
            reason = safe_markdown(t.last_reason, limit=DETAIL_CHARS)
            lines.append(
                f"| {t.region} | {t.state.value} | {t.consecutive_failures} | {t.consecutive_successes} "
                f"| {t.last_status.value if t.last_status else '-'} {reason} |"
            )
        lines += self.quorum.lines()
        lines += self.rebalance.lines()
        active = self.live.active
        if active:
            lines.append(f"\nfailover running: {active.source} → {active.target}")
        workflow.set_current_details("\n".join(lines))


WORKFLOWS = [FleetMonitor]
