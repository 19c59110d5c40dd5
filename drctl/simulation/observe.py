"""What the monitor would observe of the simulated world: `FleetEvidence`, with seeded noise.

The observer sees each world step (`record`) to keep the window figures a real reader keeps
(requests and failures since the last tick, the worst TTFT in it), and turns the world at a tick
into the core's evidence (`evidence`): the probe's facts, the passive signals, the capacity
reader's facts and each vantage point's vote. It reports facts only; it judges nothing.

Not modelled: a stalled region (requests in flight, none finishing), so `PassiveFacts.stalled` is
always False; a vantage point's own view differs from the probe's only by noise and partition.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from drctl.decision.evidence import (
    CapacityFacts,
    FleetEvidence,
    Operation,
    PassiveFacts,
    ProbeFacts,
    RegionEvidence,
    Vote,
)
from drctl.simulation.world import Region, World

# Simulated time 0; any fixed instant would do, the evidence only needs aware datetimes.
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(now_s: float) -> datetime:
    return T0 + timedelta(seconds=now_s)


@dataclass
class ObserveSettings:
    """Noise and thresholds of the observation."""

    probe_late_ms: float = 1000.0  # the probe's first-token deadline: a replica slower than this fails late
    ttft_noise: float = 0.05  # relative standard deviation of every TTFT read
    p99_over_mean: float = 1.3  # a window's TTFT p99 against its worst step mean
    missed_probe_p: float = 0.02  # a tick whose probe did not report in time
    vote_unknown_p: float = 0.02  # a vantage's vote lost
    capacity_unreadable_p: float = 0.5  # a down region's replica API unreachable too


@dataclass
class _Window:
    offered: float = 0.0
    failed: float = 0.0
    ttft_max_ms: float = 0.0
    seconds: float = 0.0


@dataclass
class Observer:
    """Turns the world into evidence; `rng` is its own, so noise never changes the world."""

    rng: random.Random
    settings: ObserveSettings = field(default_factory=ObserveSettings)
    windows: dict[str, _Window] = field(default_factory=dict)
    # The weights in effect at each step of the window; more than one: the loads mix weightings.
    window_weights: list[dict[str, int]] = field(default_factory=list)

    def record(self, world: World, dt_s: float) -> None:
        """Add the world's last step to the window of each region."""
        if world.tier.in_effect not in self.window_weights:
            self.window_weights.append(dict(world.tier.in_effect))
        for name, region in world.regions.items():
            w = self.windows.setdefault(name, _Window())
            w.offered += region.offered_rps * dt_s
            w.seconds += dt_s
            w.failed += region.failed_rps * dt_s
            w.ttft_max_ms = max(w.ttft_max_ms, region.ttft_ms)

    def _noisy(self, value: float) -> float:
        return max(0.0, value * self.rng.gauss(1.0, self.settings.ttft_noise))

    def _probe(self, region: Region, now: datetime) -> ProbeFacts | None:
        if self.rng.random() < self.settings.missed_probe_p:
            return None
        if not region.gateway_up:
            return ProbeFacts(answered=False, completions_tried=1, errors=["connect"], at=now)
        failing: list[str] = []
        late: list[str] = []
        ok = 0
        ready = region.ready
        for replica in ready:
            errored = self.rng.random() < replica.error_p
            ttft = self._noisy(region.ttft_ms / _mean_factor(region) * replica.ttft_factor)
            if errored or ttft > self.settings.probe_late_ms:
                failing.append(replica.name)
                if not errored:
                    late.append(replica.name)
            else:
                ok += 1
        gateway_ok, gateway_ttft, errors = self._gateway(region)
        errors |= {"timeout"} if late else set()
        errors |= {"500"} if len(late) < len(failing) else set()
        return ProbeFacts(
            answered=True,
            completions_ok=ok + gateway_ok,
            completions_tried=len(ready) + 1,
            errors=sorted(errors),
            ttft_ms=gateway_ttft,
            replicas_failing=failing,
            replicas_late_only=late,
            queue_waiting=region.queue,
            finished_total=region.finished_total,
            at=now,
        )

    def _gateway(self, region: Region) -> tuple[bool, float | None, set[str]]:
        """The gateway's own completion, which lands on a ready replica as a user's request does: a
        500 as often as users meet a replica error, too late as often as a full queue refuses them
        (or when the queue alone makes the first token miss the probe's deadline)."""
        if not region.ready:
            return False, None, {"503"}
        offered = region.offered_rps
        errored = (region.failed_rps - region.refused_rps) / offered if offered > 0 else _error_share(region)
        refused = region.refused_rps / offered if offered > 0 else 0.0
        ttft = self._noisy(region.ttft_ms)
        draw = self.rng.random()
        if draw < errored:
            return False, None, {"500"}
        if draw < errored + refused or ttft > self.settings.probe_late_ms:
            return False, None, {"timeout"}
        return True, ttft, set()

    def _votes(self, world: World, region: Region) -> dict[str, Vote]:
        votes: dict[str, Vote] = {}
        for vantage in world.vantages:
            if self.rng.random() < self.settings.vote_unknown_p:
                votes[vantage] = "unknown"
            elif vantage in world.partitioned:
                votes[vantage] = "down"
            else:
                # A vantage point sends the probe's own completion through the gateway.
                votes[vantage] = "up" if region.gateway_up and self._gateway(region)[0] else "down"
        return votes

    def _region(self, world: World, region: Region, now: datetime) -> RegionEvidence:
        w = self.windows.get(region.name, _Window())
        error_rate = min(1.0, w.failed / w.offered) if w.offered > 0 else None
        p99 = self._noisy(w.ttft_max_ms * self.settings.p99_over_mean) if w.ttft_max_ms > 0 else None
        passive = PassiveFacts(error_rate=error_rate, ttft_p99_ms=p99, requests=w.offered)
        capacity: CapacityFacts | None = CapacityFacts(
            ready=len(region.ready),
            loading=region.loading,
            desired=len(region.replicas),
            per_replica=region.per_replica_rps,
            load=w.offered / w.seconds if w.seconds > 0 else None,
            ttft_p99_ms=p99,
            error_rate=error_rate,
            waiting=region.queue,
        )
        if not region.gateway_up and self.rng.random() < self.settings.capacity_unreadable_p:
            capacity = None
        return RegionEvidence(
            name=region.name,
            home_weight=region.home_weight,
            probe=self._probe(region, now),
            passive=passive,
            votes=self._votes(world, region),
            capacity=capacity,
        )

    def evidence(
        self,
        world: World,
        weights_applied: dict[str, int] | None,
        operations: list[Operation],
    ) -> FleetEvidence:
        """The evidence at the world's current time; the windows start again."""
        now = at(world.now_s)
        regions = {name: self._region(world, region, now) for name, region in world.regions.items()}
        steady = len(self.window_weights) <= 1
        self.windows, self.window_weights = {}, []
        return FleetEvidence(
            at=now,
            regions=regions,
            weights_in_effect=world.tier.read(world.now_s),
            weights_applied=weights_applied,
            loads_steady=steady,
            operations=operations,
        )


def _mean_factor(region: Region) -> float:
    ready = region.ready
    return sum(r.ttft_factor for r in ready) / len(ready) if ready else 1.0


def _error_share(region: Region) -> float:
    ready = region.ready
    return sum(r.error_p for r in ready) / len(ready) if ready else 1.0
