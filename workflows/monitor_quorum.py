"""The monitor's quorum vote (`health.quorum`): other regions' workers confirm a region is down.

When the monitor's `_decide` would fail a region over automatically, the vote runs first, as the monitor's child
task (so nothing else is decided meanwhile): each other region's worker probes the region once, on
its own queue, in parallel. The monitor's own probe is one vote for down. Only a strict majority of
all voters seeing it down starts the failover, in the same task. Otherwise the vote is recorded,
NO_QUORUM is raised, and the next vote waits a back-off (votes run only on a transition to
UNHEALTHY or when the back-off expires, never every round).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError, TimeoutError, TimeoutType

with workflow.unsafe.imports_passed_through():
    from drctl.models.activity_io import ProbeRequest
    from drctl.models.fleet_spec import RegionSpec
    from drctl.models.health import RegionState
    from drctl.models.quorum import MAIN, NO_QUORUM, QuorumVote, decide, view_of
    from drctl.models.safe_text import safe_markdown
    from workflows import calls
    from workflows.common import DETAIL_CHARS
    from workflows.monitor_run import MonitorRun

PATCH = "monitor-quorum"
EARLY_PATCH = "monitor-early-vote"


class MonitorQuorum:
    """Votes on the `MonitorRun`'s regions; a confirmed vote runs `failover` (MonitorActions's)."""

    def __init__(self, run: MonitorRun, failover: Callable[[str, str], Awaitable[None]]) -> None:
        self.run = run
        self.failover = failover
        # Peers' views of a SUSPECT region, asked before it turns UNHEALTHY.
        self.early: dict[str, asyncio.Task[dict[str, tuple[str, datetime]]]] = {}

    def on(self) -> bool:
        # Behind patched(): histories recorded before the quorum (its spec field absent: off) never get here.
        return self.run.state.spec.quorum.mode == "majority" and workflow.patched(PATCH)

    def vote_waits(self, region: str) -> bool:
        """A vote on `region` found no quorum and its back-off has not expired: no failover, no vote yet."""
        vote = self.run.state.votes.get(region)
        return vote is not None and vote.verdict == "no_quorum" and workflow.now() < vote.retry_at

    def forget_votes(self) -> str | None:
        """Drop votes on regions no longer UNHEALTHY (the next transition votes afresh).

        Returns NO_QUORUM while a vote without quorum stands.
        """
        s = self.run.state
        s.votes = {
            r: v
            for r, v in s.votes.items()
            if r in s.trackers and s.trackers[r].state is RegionState.UNHEALTHY
        }
        moved = {rec.source for rec in s.failed_over}
        if any(v.verdict == "no_quorum" and r not in moved for r, v in s.votes.items()):
            return NO_QUORUM
        return None

    def vote_due(self) -> list[datetime]:
        """When the watcher must wake for a re-vote (the rounds loop calls `_decide` every round anyway)."""
        return [v.retry_at for v in self.run.state.votes.values() if v.verdict == "no_quorum"]

    def early_votes(self) -> None:
        """Ask the other regions' views of a region as soon as it is SUSPECT, while the monitor's own
        probe confirms: a slow region's vote then costs no second probe's wait after UNHEALTHY.
        Only views seeing it down are kept for the vote (and only while fresh); others are asked again."""
        s = self.run.state
        for name in [
            r
            for r in self.early
            if s.trackers.get(r) is None
            or s.trackers[r].state in (RegionState.HEALTHY, RegionState.RECOVERING)
        ]:
            del self.early[name]  # the suspicion cleared: its activities finish unread
        suspect = [n for n, t in s.trackers.items() if t.state is RegionState.SUSPECT and n not in self.early]
        if not suspect or not self.on() or not workflow.patched(EARLY_PATCH):
            return
        for name in suspect:
            self.early[name] = asyncio.ensure_future(self._peer_views(name))

    async def _peer_views(self, region: str, skip: Collection[str] = ()) -> dict[str, tuple[str, datetime]]:
        """Every other region's view of `region` (but those in `skip`), with when it arrived."""
        peers = [r for r in self.run.state.spec.regions if r.name != region and r.name not in skip]
        seen = await asyncio.gather(*(self._view_from(peer, region) for peer in peers))
        return {peer.name: (view, workflow.now()) for peer, view in zip(peers, seen, strict=True)}

    async def vote_then_failover(self, source: str, target: str) -> None:
        s = self.run.state
        try:
            vote = await self._vote(source)
            still = s.trackers.get(source)
            if (
                vote.verdict == "confirmed"
                and still is not None
                and still.state is RegionState.UNHEALTHY
                and s.policy == "automatic"
                and not s.paused
            ):
                await self.failover(source, target)  # clears run.child itself
                return
        finally:
            if self.run.child is not None:  # no quorum (or the region recovered): failover did not run
                self.run.child_done()

    async def _vote(self, region: str) -> QuorumVote:
        s = self.run.state
        spec = s.spec
        t = s.trackers[region]
        views = {MAIN: f"down: {t.last_reason or t.state.value}"}
        early = self.early.pop(region, None)
        kept: dict[str, str] = {}
        if early is not None:
            fresh = workflow.now() - timedelta(seconds=spec.quorum.max_age_s)
            kept = {
                peer: view
                for peer, (view, at) in (await early).items()
                if view.startswith("down") and at >= fresh
            }
        asked = {peer: view for peer, (view, _) in (await self._peer_views(region, skip=kept)).items()} | kept
        views.update({r.name: asked[r.name] for r in spec.regions if r.name != region})
        vote = decide(views, workflow.now(), s.votes.get(region), spec.interval_s)
        s.votes[region] = vote
        log = workflow.logger.info if vote.verdict == "confirmed" else workflow.logger.error
        log("vote on %s: %s; %s", region, vote.summary(), "; ".join(f"{k}: {v}" for k, v in views.items()))
        return vote

    async def _view_from(self, peer: RegionSpec, region: str) -> str:
        spec = self.run.state.spec
        try:
            batch = await calls.probe_from(
                ProbeRequest(regions=[region]),
                queue=peer.queue,
                probe_timeout_s=spec.probe_timeout_s,
                vantage_timeout_s=spec.quorum.vantage_timeout_s,
                summary=f"{peer.name} votes on {region}",
            )
        except ActivityError as exc:
            if isinstance(exc.cause, CancelledError):
                raise  # the monitor is stopping
            if isinstance(exc.cause, TimeoutError) and exc.cause.type is TimeoutType.SCHEDULE_TO_START:
                return f"missing: no worker on {peer.queue} took the probe within {spec.quorum.vantage_timeout_s:g}s"
            return f"missing: {peer.queue}: {exc.cause or exc}"
        return view_of(batch, region, workflow.now(), spec.quorum.max_age_s, spec.fail_on_degraded)

    def lines(self) -> list[str]:
        """The details markdown's votes section (Temporal UI)."""
        s = self.run.state
        if not s.votes:
            return []
        lines = ["\n| vote on | at | result | views |\n|---|---|---|---|"]
        for region, v in s.votes.items():
            # A view quotes the probe's reason, which a region's server wrote.
            views = "; ".join(f"{k}: {x}" for k, x in v.views.items())
            lines.append(
                f"| {region} | {v.at:%H:%M:%S} | {safe_markdown(v.summary())} "
                f"| {safe_markdown(views, limit=DETAIL_CHARS)} |"
            )
        return lines
