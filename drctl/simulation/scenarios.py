"""Scenarios generated from a seed: a fleet of 2 to 5 regions, its load, and one family's faults.

`generate(seed, family)` is a pure function of its arguments (the generator is seeded from the
text "family/seed", which Python hashes the same way in every process), so a failing world is
replayed from the two values a failure prints.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from drctl.simulation.faults import Fault, FaultKind

FAMILIES = (
    "down",
    "slow",
    "errors",
    "capacity_loss",
    "flapping",
    "loading",
    "cascade",
    "partition",
    "tier_restart",
    "saturated",
)
REGION_NAMES = ("us-west-1", "us-east-1", "eu-west-1", "eu-central-1", "ap-south-1")
VANTAGES = ("vantage-a", "vantage-b", "vantage-c")
# What share of a fleet's capacity the generator plans to use (the core's default target_utilisation
# is the same figure): a single lost region's load must fit in the survivors' usable capacity.
PLANNED_UTILISATION = 0.8


@dataclass(frozen=True)
class RegionSetup:
    name: str
    home_weight: int
    replicas: int
    per_replica_rps: float
    base_ttft_ms: float
    model_load_s: float

    @property
    def capacity_rps(self) -> float:
        return self.replicas * self.per_replica_rps


@dataclass(frozen=True)
class Scenario:
    """One world to run: the fleet, the load, the faults and the monitor's settings."""

    seed: int
    family: str
    regions: tuple[RegionSetup, ...]
    load_rps: float
    faults: tuple[Fault, ...]
    duration_s: float
    interval_s: float
    failure_threshold: int
    quorum: int = 2
    vantages: tuple[str, ...] = VANTAGES
    apply_latency_s: float = 1.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def home_weights(self) -> dict[str, int]:
        return {r.name: r.home_weight for r in self.regions}

    @property
    def fault_start_s(self) -> float:
        return min(f.start_s for f in self.faults)

    def describe(self) -> str:
        fleet = ", ".join(
            f"{r.name} w{r.home_weight} {r.replicas}x{r.per_replica_rps:g}rps" for r in self.regions
        )
        faults = "; ".join(f.describe() for f in self.faults)
        return (
            f"seed {self.seed} family {self.family}: {fleet}; load {self.load_rps:.1f} rps; "
            f"interval {self.interval_s:g}s threshold {self.failure_threshold}; faults: {faults}"
        )


def largest_remainder(parts: dict[str, float], total: int = 100) -> dict[str, int]:
    """Integers proportional to `parts` summing to exactly `total`."""
    whole = sum(parts.values())
    raw = {k: v / whole * total for k, v in parts.items()}
    out = {k: int(v) for k, v in raw.items()}
    for k in sorted(raw, key=lambda k: (out[k] - raw[k], k))[: total - sum(out.values())]:
        out[k] += 1
    return out


def _fleet(rng: random.Random) -> tuple[RegionSetup, ...]:
    n = rng.randint(2, 5)
    shapes = [(rng.randint(2, 4), rng.choice((4.0, 5.0, 6.0, 8.0))) for _ in range(n)]
    weights = largest_remainder({REGION_NAMES[i]: c * p for i, (c, p) in enumerate(shapes)})
    return tuple(
        RegionSetup(
            name=REGION_NAMES[i],
            home_weight=weights[REGION_NAMES[i]],
            replicas=count,
            per_replica_rps=per,
            base_ttft_ms=float(rng.randint(40, 100)),
            model_load_s=float(rng.choice((10, 20, 40))),
        )
        for i, (count, per) in enumerate(shapes)
    )


def _survivable_load(rng: random.Random, fleet: tuple[RegionSetup, ...], lost: list[str]) -> float:
    """A load the fleet serves comfortably, and that the regions not in `lost` can still carry."""
    usable = sum(r.capacity_rps for r in fleet) * PLANNED_UTILISATION
    left = sum(r.capacity_rps for r in fleet if r.name not in lost) * PLANNED_UTILISATION
    # At home weights no region may start over its usable capacity, or every world begins with a shed.
    per_region = min(r.capacity_rps * PLANNED_UTILISATION / (r.home_weight / 100) for r in fleet)
    return round(min(usable * rng.uniform(0.3, 0.6), left * 0.75, per_region * 0.85), 1)


def _maybe_end(rng: random.Random, start_s: float) -> float | None:
    """Half of the faults are steady; the others end in time to see the return."""
    return None if rng.random() < 0.5 else start_s + rng.randint(40, 120)


def generate(seed: int, family: str) -> Scenario:
    """The world of `family` number `seed`."""
    if family not in FAMILIES:
        raise ValueError(f"unknown scenario family {family!r}; known: {', '.join(FAMILIES)}")
    rng = random.Random(f"{family}/{seed}")
    fleet = _fleet(rng)
    names = [r.name for r in fleet]
    at = float(rng.randint(20, 40))
    victim = rng.choice(names)
    big = max((r for r in fleet if r.name != victim), key=lambda r: r.capacity_rps).name
    lost = [victim]
    faults: list[Fault] = []
    if family == "down":
        faults.append(Fault("down", at, _maybe_end(rng, at), victim))
    elif family == "slow":
        factor = rng.choice((3.0, 5.0, 10.0, 20.0))
        faults.append(Fault("slow", at, _maybe_end(rng, at), victim, {"factor": factor}))
    elif family == "errors":
        p = rng.choice((0.2, 0.5, 0.9, 1.0))
        faults.append(Fault("errors", at, _maybe_end(rng, at), victim, {"p": p}))
    elif family == "capacity_loss":
        size = next(r.replicas for r in fleet if r.name == victim)
        # Mostly all but one replica: enough lost that the survivor is over its usable capacity.
        lose = size - 1 if rng.random() < 0.7 else rng.randint(1, size - 1)
        faults.append(Fault("capacity_loss", at, _maybe_end(rng, at), victim, {"replicas": lose}))
    elif family == "flapping":
        size = next(r.replicas for r in fleet if r.name == victim)
        # One replica crash-looping, or (a third of the worlds) the whole region going up and down.
        cycle = {
            "replicas": size if rng.random() < 0.33 else 1,
            "down_s": float(rng.randint(3, 15)),
            "up_s": float(rng.randint(3, 20)),
        }
        faults.append(Fault("flapping", at, _maybe_end(rng, at), victim, cycle))
    elif family == "loading":
        size = next(r.replicas for r in fleet if r.name == victim)
        faults.append(Fault("loading", at, None, victim, {"replicas": rng.randint(1, size - 1)}))
    elif family == "cascade":
        lost.append(big)
        if len(fleet) == 2:
            # The case: A dies, traffic moves to B, A comes back, then B dies.
            back = at + rng.randint(15, 40)
            faults.append(Fault("down", at, back, victim))
            faults.append(Fault("down", back + rng.randint(0, 15), None, big))
            lost = [victim]  # A is back, so each fault alone must be survivable
        elif rng.random() < 0.33:
            # The three-region case: A loses replicas and sheds, then B dies; B's share
            # must not all land on A, which has fewer replicas left than the others.
            size = next(r.replicas for r in fleet if r.name == victim)
            faults.append(Fault("capacity_loss", at, None, victim, {"replicas": max(1, size // 2)}))
            faults.append(Fault("down", at + rng.randint(20, 60), _maybe_end(rng, at + 90), big))
        else:
            faults.append(Fault("down", at, _maybe_end(rng, at + 30), victim))
            faults.append(Fault("down", at + rng.randint(3, 30), _maybe_end(rng, at + 60), big))
    elif family == "partition":
        vantage = rng.choice(VANTAGES)
        faults.append(Fault("partition", at, _maybe_end(rng, at), None, {"vantage": vantage}))
        if rng.random() < 0.5:
            faults.append(Fault("down", at + rng.randint(0, 30), None, victim))
        else:
            lost = []
    elif family == "tier_restart":
        first: FaultKind = "down" if rng.random() < 0.7 else "capacity_loss"
        size = next(r.replicas for r in fleet if r.name == victim)
        faults.append(Fault(first, at, None, victim, {"replicas": size - 1} if first != "down" else {}))
        restart = at + rng.randint(40, 90)
        faults.append(Fault("tier_restart", restart, None, None, {"down_s": float(rng.choice((0, 2, 5)))}))
    load = _survivable_load(rng, fleet, lost)
    if family == "saturated":
        surge = round(sum(r.capacity_rps for r in fleet) * rng.uniform(1.05, 1.5), 1)
        faults.append(Fault("surge", at, _maybe_end(rng, at), None, {"load_rps": surge}))
    return Scenario(
        seed=seed,
        family=family,
        regions=fleet,
        load_rps=load,
        faults=tuple(faults),
        duration_s=240.0,
        interval_s=rng.choice((5.0, 10.0)),
        failure_threshold=rng.choice((2, 3)),
    )
