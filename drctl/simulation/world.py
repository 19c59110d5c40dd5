"""The simulated fleet: regions of replicas, offered load, queues and the global tier, in simulated time.

Everything here is plain state advanced by `World.step(dt_s)`; nothing reads a clock or does I/O.
The load unit is requests per second (rps): a replica serves `per_replica_rps`, a region's offered
load is the fleet's load times its share of the weights in effect. Where a region cannot serve what
it is offered, the requests fail: the world is never lenient, so a policy that leaves weight on a
dead region pays for it in `failed`. A slow replica keeps its capacity and only answers later (its
TTFT times its factor); a queue is shared by the region's ready replicas.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

ReplicaState = Literal["serving", "loading", "down"]

# How long a region may queue before the excess fails (a gateway's queue timeout): past this many
# seconds of its capacity waiting, new requests are refused with 503.
MAX_QUEUE_S = 2.0


@dataclass
class Replica:
    """One model server. `ttft_factor` > 1 is a slow replica; `error_p` > 0 an erroring one."""

    name: str
    state: ReplicaState = "serving"
    ready_at_s: float = 0.0  # when a loading replica starts serving
    ttft_factor: float = 1.0
    error_p: float = 0.0

    @property
    def ready(self) -> bool:
        return self.state == "serving"


@dataclass
class Region:
    """A region: its gateway, replicas, home weight and what it did in the last step."""

    name: str
    home_weight: int
    per_replica_rps: float
    replicas: list[Replica]
    base_ttft_ms: float = 120.0
    model_load_s: float = 20.0
    gateway_up: bool = True
    queue: float = 0.0
    # The last step's figures, read by the observation.
    offered_rps: float = 0.0
    failed_rps: float = 0.0
    refused_rps: float = 0.0  # of failed_rps, refused by a full queue (the rest: replica errors)
    served_rps: float = 0.0
    ttft_ms: float = 0.0
    finished_total: float = 0.0

    @property
    def ready(self) -> list[Replica]:
        return [r for r in self.replicas if r.ready]

    @property
    def loading(self) -> int:
        return sum(r.state == "loading" for r in self.replicas)

    @property
    def capacity_rps(self) -> float:
        return len(self.ready) * self.per_replica_rps if self.gateway_up else 0.0

    @property
    def can_serve(self) -> bool:
        """True when the region answers at least part of what it is offered (the truth, not a verdict)."""
        return self.gateway_up and bool(self.ready) and any(r.error_p < 1.0 for r in self.ready)

    def bring_back(self, replica: Replica, now_s: float) -> None:
        """A replica restarted: it loads its model before it serves again."""
        replica.state = "loading"
        replica.ready_at_s = now_s + self.model_load_s

    def step(self, offered_rps: float, dt_s: float, now_s: float) -> None:
        """Serve `offered_rps` for `dt_s`: queue what is over capacity, fail what the queue cannot hold."""
        for r in self.replicas:
            if r.state == "loading" and now_s >= r.ready_at_s:
                r.state = "serving"
        self.offered_rps = offered_rps
        ready = self.ready
        capacity = len(ready) * self.per_replica_rps if self.gateway_up else 0.0
        if capacity <= 0:
            # Gateway down or nothing ready: every request fails (503 or refused), the queue is lost.
            self.queue, self.served_rps, self.failed_rps, self.ttft_ms = 0.0, 0.0, offered_rps, 0.0
            self.refused_rps = offered_rps
            return
        demand = self.queue + offered_rps * dt_s
        served = min(demand, capacity * dt_s)
        backlog = demand - served
        limit = capacity * MAX_QUEUE_S
        refused = max(0.0, backlog - limit)
        self.queue = backlog - refused
        # Requests spread evenly over ready replicas; an erroring one fails its share with its p.
        error_share = sum(r.error_p for r in ready) / len(ready)
        self.served_rps = served / dt_s * (1 - error_share)
        self.refused_rps = refused / dt_s
        self.failed_rps = self.refused_rps + served / dt_s * error_share
        self.finished_total += served
        utilisation = min(offered_rps / capacity, 1.0)
        slow = sum(r.ttft_factor for r in ready) / len(ready)
        # Queueing: time waiting for a slot, plus the batching slowdown of a busy server.
        wait_ms = self.queue / capacity * 1000.0
        self.ttft_ms = self.base_ttft_ms * slow * (1 + utilisation**4) + wait_ms


@dataclass
class GlobalTier:
    """The global weights: a write takes effect after `apply_latency_s`; a restart resets to config."""

    config_weights: dict[str, int]
    apply_latency_s: float = 1.0
    in_effect: dict[str, int] = field(default_factory=dict)
    pending: list[tuple[float, dict[str, int]]] = field(default_factory=list)
    unreadable_until_s: float = -1.0

    def __post_init__(self) -> None:
        if not self.in_effect:
            self.in_effect = dict(self.config_weights)

    def write(self, weights: dict[str, int], now_s: float) -> bool:
        """Queue a write; False (nothing written) while the tier is restarting."""
        if now_s < self.unreadable_until_s:
            return False
        self.pending.append((now_s + self.apply_latency_s, dict(weights)))
        return True

    def restart(self, now_s: float, down_s: float) -> None:
        """The tier comes back with its config weights; writes in flight are lost; unreadable meanwhile."""
        self.pending.clear()
        self.in_effect = dict(self.config_weights)
        self.unreadable_until_s = now_s + down_s

    def read(self, now_s: float) -> dict[str, int] | None:
        return None if now_s < self.unreadable_until_s else dict(self.in_effect)

    def step(self, now_s: float) -> None:
        due = [w for at, w in self.pending if at <= now_s]
        self.pending = [(at, w) for at, w in self.pending if at > now_s]
        if due:
            self.in_effect = due[-1]

    def shares(self) -> dict[str, float]:
        """Each region's share of the offered load. All zero: the tier answers every region (as Route 53
        answers all records when all are unhealthy), so load splits evenly."""
        total = sum(self.in_effect.values())
        if total <= 0:
            return {name: 1 / len(self.in_effect) for name in self.in_effect}
        return {name: w / total for name, w in self.in_effect.items()}


@dataclass
class World:
    """The whole fleet at simulated time `now_s`, with totals of what users saw."""

    regions: dict[str, Region]
    tier: GlobalTier
    load_rps: float
    vantages: list[str]
    partitioned: set[str] = field(default_factory=set)
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    now_s: float = 0.0
    offered_total: float = 0.0
    failed_total: float = 0.0

    def step(self, dt_s: float) -> None:
        """Advance `dt_s`: the tier applies due writes, then each region serves its share."""
        self.now_s += dt_s
        self.tier.step(self.now_s)
        shares = self.tier.shares()
        for name, region in self.regions.items():
            region.step(self.load_rps * shares.get(name, 0.0), dt_s, self.now_s)
        self.offered_total += self.load_rps * dt_s
        self.failed_total += sum(r.failed_rps for r in self.regions.values()) * dt_s

    def user_ttft_ms(self) -> float:
        """The TTFT of the slowest region serving more than 1 % of users in the last step: what a
        fleet-wide p99 sees (failed requests excluded)."""
        served = sum(r.served_rps for r in self.regions.values())
        seen = [r.ttft_ms for r in self.regions.values() if served > 0 and r.served_rps > served * 0.01]
        return max(seen, default=0.0)

    def step_error_share(self) -> float:
        offered = sum(r.offered_rps for r in self.regions.values())
        return sum(r.failed_rps for r in self.regions.values()) / offered if offered > 0 else 0.0

    def dead(self) -> set[str]:
        """Regions that cannot serve at all right now (the truth the metrics are measured against)."""
        return {name for name, r in self.regions.items() if not r.can_serve}
