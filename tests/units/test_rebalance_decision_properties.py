"""The rebalance the monitor runs (`decide_rebalance`), in generated worlds: 2 to 4 regions whose
replicas carry the share the weights give them, with capacity loss, slow and failing regions, run
tick by tick in simulated time. After every decision: the weights keep their total, no share goes
onto a region that breaches (over its capacity only when the whole fleet is), is not read or
has no known capacity, none onto a region past its usable
capacity while another has room, and the memory given is never changed. Over a trace under a
steady fault: no region's weight changes direction more than once per `return_stable_s`, a return
that meets a failing region and is shed again at once (a retreat) aside."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drctl.config.capacity import RebalanceLimits
from drctl.models.capacity import RegionSignals, breaches
from drctl.models.fleet_spec import FleetSpec
from drctl.models.rebalance import RebalanceMemory
from drctl.models.rebalance_decision import MIN_REQUESTS, RebalanceTick, after_step, decide_rebalance
from tests.support.config import spec as make_spec

T0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
PER_REPLICA = 4  # max_concurrency_per_replica
STEADY_TTFT_MS = 100.0
NAMES = ["r0", "r1", "r2", "r3"]


@dataclass(frozen=True)
class Region:
    home: int
    ready: int
    slow: float  # TTFT multiplier (1: none)
    errors: float  # failed share of requests


@dataclass(frozen=True)
class World:
    regions: dict[str, Region]
    load: float  # concurrent streams offered to the whole fleet
    unread: frozenset[str]  # regions whose worker does not answer, every tick

    def spec(self) -> FleetSpec:
        s = make_spec([(n, r.home, max(1, r.ready)) for n, r in self.regions.items()])
        lim = RebalanceLimits(breach_window_s=2, shed_step_interval_s=5, return_stable_s=30)
        return s.model_copy(
            update={
                "rebalance": "automatic",
                "max_concurrency_per_replica": PER_REPLICA,
                "rebalance_limits": lim,
            }
        )

    def signals(self, weights: dict[str, int], now: datetime) -> dict[str, RegionSignals]:
        out = {}
        total = sum(weights.values()) or 1
        for n, r in self.regions.items():
            if n in self.unread:
                continue
            offered = self.load * weights.get(n, 0) / total
            slots = r.ready * PER_REPLICA
            running, waiting = min(offered, slots), max(0.0, offered - slots)
            queued = waiting / max(slots, 1) * 1000.0  # each queued request per slot adds a second
            out[n] = RegionSignals(
                region=n,
                ready_replicas=r.ready,
                desired_replicas=max(1, r.ready),
                running=running,
                waiting=waiting,
                ttft_p99_ms=(STEADY_TTFT_MS + queued) * r.slow if offered > 0 else None,
                error_rate=r.errors if offered > 0 else None,
                requests=offered * 10 if offered > 0 else 0.0,
                window_s=5,
                measured_at=now,
            )
        return out


@st.composite
def worlds(draw: st.DrawFn) -> World:
    n = draw(st.integers(2, 4))
    homes = draw(st.lists(st.integers(1, 10), min_size=n, max_size=n))
    raw = [h * 100 / sum(homes) for h in homes]
    weights = [int(w) for w in raw]
    weights[0] += 100 - sum(weights)
    regions = {}
    for i, name in enumerate(NAMES[:n]):
        regions[name] = Region(
            home=weights[i],
            ready=draw(st.integers(0, 4)),
            slow=draw(st.sampled_from([1.0, 1.0, 5.0, 20.0])),
            errors=draw(st.sampled_from([0.0, 0.0, 0.0, 0.3])),
        )
    cap = sum(r.ready for r in regions.values()) * PER_REPLICA
    load = draw(st.floats(0.0, max(1.0, cap * 1.1)))
    unread = frozenset(draw(st.sets(st.sampled_from(NAMES[:n]), max_size=1)))
    return World(regions, load, unread)


def _gainers(before: dict[str, int], after: dict[str, int]) -> list[str]:
    return [r for r, w in after.items() if w > before.get(r, 0)]


Trace = list[tuple[dict[str, int], dict[str, int], str, datetime]]


def _run(world: World, ticks: int = 40) -> Trace:
    """Tick every 2 s, applying each step as the Rebalance child does: a return step waits
    `return_step_interval_s`, probes the regions it gave share to (a probe sees a slow or failing
    region whatever its load) and rolls back on a regression."""
    spec = world.spec()
    weights = {n: r.home for n, r in world.regions.items()}
    mem = RebalanceMemory()
    trace: Trace = []
    now = T0
    for _ in range(ticks):
        now += timedelta(seconds=2)
        signals = world.signals(weights, now)
        missing = [f"{r}: no capacity signals" for r in sorted(world.unread)]
        frozen = mem.model_dump()
        v = decide_rebalance(
            RebalanceTick(current=dict(weights), signals=signals, missing=missing), mem, spec, now
        )
        assert mem.model_dump() == frozen, "decide_rebalance changed the memory it was given"
        d = v.decision
        before, after = d.weights_before, d.weights_after
        assert sum(after.values()) == sum(before.values()) == 100, (before, after)
        assert all(w >= 0 for w in after.values())
        # A step held back by time (return stability, spacing, back-off) still records the step it
        # holds: its weights are checked as if applied.
        found = {r: breaches(c, spec.slo, min_requests=MIN_REQUESTS) for r, c in v.caps.items()}
        for r in _gainers(before, after):
            assert r in signals, f"{r} gained share unread: {d.line()}"
            # Over its usable capacity only to even out an overload the whole fleet shares.
            known = [c for c in v.caps.values() if c.known]
            fleet_full = sum(c.load for c in known) > sum(c.usable for c in known)
            allowed = set() if not fleet_full else {"capacity"}
            assert set(found[r]) <= allowed, f"{r} gained share while breaching {found[r]}: {d.line()}"
            assert v.caps[r].known, f"{r} gained share with its capacity unknown: {d.line()}"
            # Past its usable capacity only when no other region read has room left.
            per_point = world.load / 100
            over = after[r] * per_point - v.caps[r].usable
            room = [
                o
                for o in v.caps
                if o != r
                and v.caps[o].known
                and not found[o]
                and (v.caps[o].usable - after[o] * per_point) > per_point
            ]
            assert over <= per_point or not room, (
                f"{r} {over:.2f} past usable while {room} have room: {d.line()}"
            )
        mem = v.memory
        if d.action == "hold":
            trace.append((before, before, d.action, now))
            continue
        d.outcome = "applied"
        if d.action == "return":
            now += timedelta(seconds=spec.rebalance_limits.return_step_interval_s)
            faulty = [
                r for r in _gainers(before, after) if world.regions[r].slow > 1 or world.regions[r].errors
            ]
            if faulty:
                d.outcome, d.weights_after = "failed", dict(before)  # rolled back
        mem = after_step(mem, d, v.plan, v.caps, spec, now)
        weights = dict(d.weights_after)
        trace.append((before, weights, d.action, now))
    return trace


def _retreats(trace: Trace) -> set[int]:
    """Ticks whose shed takes share off a region the last return gave it to: the return met a
    failing region and reverses (a safety move, exempt from the stability window as the decision
    core's `retreat` is; here it waits for the breach window and the shed spacing)."""
    out, returned = set(), set()
    for i, (before, after, action, _) in enumerate(trace):
        if action == "return":
            returned = {r for r in after if after[r] > before[r]}
        elif action == "shed":
            reversed_ = {r for r in returned if after[r] < before[r]}
            if reversed_:
                out.add(i)
            returned -= reversed_
    return out


def _direction_changes(trace: Trace, region: str) -> list[datetime]:
    """When `region`'s weight turned (from falling to rising or back), retreats aside."""
    last, turns, exempt = 0, [], _retreats(trace)
    for i, (before, after, _, at) in enumerate(trace):
        step = (after[region] > before[region]) - (after[region] < before[region])
        if step and last and step != last and i not in exempt:
            turns.append(at)
        if step:
            last = step
    return turns


# The same examples every run (CI must not find a new world by chance); HYPOTHESIS_RANDOM=1 explores.
@settings(
    max_examples=150,
    deadline=None,
    derandomize=os.environ.get("HYPOTHESIS_RANDOM") != "1",
    suppress_health_check=[HealthCheck.too_slow],
)
@given(worlds())
def test_every_decision_keeps_the_promises_and_no_region_flaps(world: World) -> None:
    trace = _run(world)
    window = timedelta(seconds=world.spec().rebalance_limits.return_stable_s)
    for r in world.regions:
        turns = _direction_changes(trace, r)
        for a, b in zip(turns, turns[1:], strict=False):
            assert b - a >= window, f"{r} turned at {[f'{t:%M:%S}' for t in turns]}: {[t[2] for t in trace]}"
