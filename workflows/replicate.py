"""Replicate (`replicate/<fleet>`): keep every replica bucket current with rclone, forever.

Each pair (source bucket → one replica) runs on its own interval as one heartbeating activity on the
replica region's queue: the standby pulls, so replication into a healthy region keeps working while
a failed region's worker is gone. Every run ends with `rclone check` and the lag it leaves, which is
the replica's RPO. The workflow continues as new after `max_runs` to keep its history short.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from drctl.models import search_attributes as sa
    from drctl.models.rpo import PairState, ReplicateInput, ReplicateState, ReplicateStatus
    from drctl.models.safe_text import safe_markdown
    from workflows import calls
    from workflows.common import DETAIL_CHARS
    from workflows.operation import cause_of

SIGNAL_STOP = "stop"
QUERY_STATUS = "status"


@workflow.defn(name="Replicate")
class Replicate:
    @workflow.init
    def __init__(self, inp: ReplicateInput) -> None:
        self.inp = inp
        self.state = inp.state or ReplicateState(pairs={p.key: PairState(pair=p) for p in inp.pairs})

    @workflow.signal(name=SIGNAL_STOP)
    def stop(self) -> None:
        self.state.stopping = True

    @workflow.query(name=QUERY_STATUS)
    def status(self) -> ReplicateStatus:
        s = self.state
        return ReplicateStatus(
            fleet=self.inp.fleet,
            rpo_target_s=self.inp.rpo_target_s,
            total_runs=s.total_runs,
            total_transfers=s.total_transfers,
            total_bytes=s.total_bytes,
            pairs=list(s.pairs.values()),
        )

    @workflow.run
    async def run(self, inp: ReplicateInput) -> ReplicateStatus:
        workflow.upsert_search_attributes([sa.PHASE.value_set("replicating")])
        while not self.state.stopping and self.state.runs < inp.max_runs:
            now = workflow.now()
            due = [ps for ps in self.state.pairs.values() if ps.next_run_at is None or ps.next_run_at <= now]
            if due:
                await asyncio.gather(*(self._run_pair(ps) for ps in due))
                self.state.runs += 1
                self._render()
            wake = min((ps.next_run_at for ps in self.state.pairs.values() if ps.next_run_at), default=None)
            left = (wake - workflow.now()).total_seconds() if wake else 1.0
            if left > 0:
                try:
                    await workflow.wait_condition(
                        lambda: self.state.stopping, timeout=timedelta(seconds=left)
                    )
                except TimeoutError:
                    pass
        await workflow.wait_condition(workflow.all_handlers_finished)
        if self.state.stopping:
            workflow.upsert_search_attributes([sa.PHASE.value_set("stopped")])
            return self.status()
        self.state.runs = 0
        workflow.continue_as_new(inp.model_copy(update={"state": self.state}))

    async def _run_pair(self, ps: PairState) -> None:
        p = ps.pair
        started = workflow.now()
        try:
            run = await calls.replicate_pair(
                p,
                queue=self.inp.queues.get(p.replica_region, self.inp.task_queue),
                timeout_s=self.inp.timeout_s,
                summary=f"rclone {p.mode} {p.bucket} {p.source_region} → {p.replica_region}",
            )
        except ActivityError as exc:
            ps.failures += 1
            workflow.logger.warning("replication %s failed: %s", p.key, cause_of(exc))
            if ps.last is not None:
                ps.last = ps.last.model_copy(update={"ok": False, "error": cause_of(exc)})
        else:
            ps.last = run
            if run.lag.lag_s is not None:
                ps.last_verified = run
            ps.runs += 1
            self.state.total_runs += 1
            self.state.total_transfers += run.stats.transfers
            self.state.total_bytes += run.stats.bytes
            if not run.ok:
                ps.failures += 1
        ps.next_run_at = started + timedelta(seconds=p.interval_s)

    def _render(self) -> None:
        lines = [
            f"## Replication of fleet `{self.inp.fleet}`",
            f"RPO target {self.inp.rpo_target_s:g} s, "
            f"{self.state.total_runs} runs, "
            f"{self.state.total_transfers} objects / {self.state.total_bytes} bytes copied",
            "\n| bucket | replica | lag s | behind | last run | transfers | bytes | check |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for ps in self.state.pairs.values():
            r = ps.last
            if r is None:
                lines.append(f"| {ps.pair.bucket} | {ps.pair.replica_region} | - | - | never | | | |")
                continue
            lag = "?" if r.lag.lag_s is None else f"{r.lag.lag_s:.1f}"
            over = " **> RPO**" if r.lag.lag_s and r.lag.lag_s > self.inp.rpo_target_s else ""
            lines.append(
                f"| {r.bucket} | {r.replica_region} | {lag}{over} | {r.lag.unreplicated} | "
                f"{r.finished_at:%H:%M:%S} | {r.stats.transfers} | {r.stats.bytes} | "
                f"{'ok' if r.check_ok else safe_markdown(r.error or 'differs', limit=DETAIL_CHARS)} |"
            )
        workflow.set_current_details("\n".join(lines))


WORKFLOWS = [Replicate]
