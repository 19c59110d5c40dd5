"""The monitor's quorum vote (`health.quorum`): other regions' workers confirm a region is down.

When `_decide` would fail a region over automatically, the vote runs first, as the monitor's child
task (so nothing else is decided meanwhile): each other region's worker probes the region once, on
its own queue, in parallel. The monitor's own probe is one vote for down. Only a strict majority of
all voters seeing it down starts the failover, in the same task. Otherwise the vote is recorded,
NO_QUORUM is raised, and the next vote waits a back-off (votes run only on a transition to
UNHEALTHY or when the back-off expires, never every round).
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError, TimeoutError, TimeoutType

with workflow.unsafe.imports_passed_through():
    from drctl.models.failover import MonitorState
    from drctl.models.health import RegionState
    from drctl.models.ops import ProbeRequest, RegionSpec
    from drctl.models.quorum import MAIN, NO_QUORUM, QuorumVote, decide, view_of
    from workflows import calls

PATCH = "monitor-quorum"


class MonitorQuorum:
    """Mixed into FleetMonitor, which holds this state and `_failover`."""

    s: MonitorState
    child: asyncio.Task[None] | None
    poke: bool

    if TYPE_CHECKING:  # MonitorActions's, called from here
        async def _failover(self, source: str, target: str) -> None: ...

    def _quorum_on(self) -> bool:
        # Behind patched(): histories recorded before the quorum (its spec field absent: off) never get here.
        return self.s.spec.quorum.mode == "majority" and workflow.patched(PATCH)

    def _vote_waits(self, region: str) -> bool:
        """A vote on `region` found no quorum and its back-off has not expired: no failover, no vote yet."""
        vote = self.s.votes.get(region)
        return vote is not None and vote.verdict == "no_quorum" and workflow.now() < vote.retry_at

    def _forget_votes(self) -> str | None:
        """Drop votes on regions no longer UNHEALTHY (the next transition votes afresh); NO_QUORUM while one stands."""
        s = self.s
        s.votes = {r: v for r, v in s.votes.items() if r in s.trackers and s.trackers[r].state is RegionState.UNHEALTHY}
        moved = {rec.source for rec in s.failed_over}
        if any(v.verdict == "no_quorum" and r not in moved for r, v in s.votes.items()):
            return NO_QUORUM
        return None

    def _vote_due(self) -> list[datetime]:
        """When the watcher must wake for a re-vote (the rounds loop calls `_decide` every round anyway)."""
        return [v.retry_at for v in self.s.votes.values() if v.verdict == "no_quorum"]

    async def _vote_then_failover(self, source: str, target: str) -> None:
        s = self.s
        try:
            vote = await self._vote(source)
            still = s.trackers.get(source)
            if (vote.verdict == "confirmed" and still is not None and still.state is RegionState.UNHEALTHY
                    and s.policy == "automatic" and not s.paused):
                await self._failover(source, target)  # clears self.child itself
                return
        finally:
            if self.child is not None:  # no quorum (or the region recovered): _failover did not run
                self.child = None
                self.poke = True

    async def _vote(self, region: str) -> QuorumVote:
        s = self.s
        spec = s.spec
        t = s.trackers[region]
        views = {MAIN: f"down: {t.last_reason or t.state.value}"}
        peers = [r for r in spec.regions if r.name != region]
        seen = await asyncio.gather(*(self._view_from(peer, region) for peer in peers))
        views.update({peer.name: view for peer, view in zip(peers, seen, strict=True)})
        vote = decide(views, workflow.now(), s.votes.get(region), spec.interval_s)
        s.votes[region] = vote
        log = workflow.logger.info if vote.verdict == "confirmed" else workflow.logger.error
        log("vote on %s: %s; %s", region, vote.summary(), "; ".join(f"{k}: {v}" for k, v in views.items()))
        return vote

    async def _view_from(self, peer: RegionSpec, region: str) -> str:
        spec = self.s.spec
        try:
            batch = await calls.probe_from(
                ProbeRequest(regions=[region]), queue=peer.queue, probe_timeout_s=spec.probe_timeout_s,
                vantage_timeout_s=spec.quorum.vantage_timeout_s, summary=f"{peer.name} votes on {region}")
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                raise  # the monitor is stopping
            if isinstance(exc.cause, TimeoutError) and exc.cause.type is TimeoutType.SCHEDULE_TO_START:
                return f"missing: no worker on {peer.queue} took the probe within {spec.quorum.vantage_timeout_s:g}s"
            return f"missing: {peer.queue}: {exc.cause or exc}"
        return view_of(batch, region, workflow.now(), spec.quorum.max_age_s, spec.fail_on_degraded)

    def _vote_lines(self) -> list[str]:
        """The details markdown's votes section (Temporal UI)."""
        s = self.s
        if not s.votes:
            return []
        lines = ["\n| vote on | at | result | views |\n|---|---|---|---|"]
        for region, v in s.votes.items():
            views = "; ".join(f"{k}: {x}" for k, x in v.views.items())
            lines.append(f"| {region} | {v.at:%H:%M:%S} | {v.summary()} | {views} |")
        return lines
