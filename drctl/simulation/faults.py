"""Faults injected into the simulated world: each starts at `start_s` and (unless steady) ends at `end_s`.

A fault changes only the world's state (replicas, gateway, the global tier, the load, a vantage's
reach); what any policy sees of it comes through the observation, as on a real fleet.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from drctl.simulation.world import World

FaultKind = Literal[
    "down", "slow", "errors", "capacity_loss", "flapping", "loading", "partition", "tier_restart", "surge"
]


@dataclass(frozen=True)
class Fault:
    """One fault. `region` is None for fleet-wide faults (tier_restart, surge, partition).

    Params by kind: slow `factor`; errors `p`; capacity_loss and loading `replicas` (how many);
    flapping `replicas`, `down_s`, `up_s` (their cycle); partition `vantage`; tier_restart `down_s`;
    surge `load_rps` (the new offered load).
    """

    kind: FaultKind
    start_s: float
    end_s: float | None = None
    region: str | None = None
    params: Mapping[str, float | str] = field(default_factory=dict)

    def describe(self) -> str:
        where = f" {self.region}" if self.region else ""
        args = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        until = f"..{self.end_s:g}s" if self.end_s is not None else "..end"
        return f"{self.kind}{where}{f'({args})' if args else ''} {self.start_s:g}s{until}"


def _num(fault: Fault, key: str) -> float:
    value = fault.params[key]
    assert isinstance(value, (int, float)), f"fault {fault.kind}: param {key} is {value!r}, not a number"
    return float(value)


def start(world: World, fault: Fault) -> None:
    """Put the fault into the world at its start."""
    region = world.regions[fault.region] if fault.region else None
    if fault.kind == "down":
        assert region is not None
        region.gateway_up = False
        for r in region.replicas:
            r.state = "down"
    elif fault.kind == "slow":
        assert region is not None
        for r in region.replicas:
            r.ttft_factor = _num(fault, "factor")
    elif fault.kind == "errors":
        assert region is not None
        for r in region.replicas:
            r.error_p = _num(fault, "p")
    elif fault.kind == "capacity_loss":
        assert region is not None
        for r in region.replicas[: int(_num(fault, "replicas"))]:
            r.state = "down"
    elif fault.kind == "loading":
        # Replicas restarted (a node drained, a rollout): they load their model, then serve.
        assert region is not None
        for r in region.replicas[: int(_num(fault, "replicas"))]:
            region.bring_back(r, world.now_s)
    elif fault.kind == "partition":
        world.partitioned.add(str(fault.params["vantage"]))
    elif fault.kind == "tier_restart":
        world.tier.restart(world.now_s, _num(fault, "down_s"))
    elif fault.kind == "surge":
        world.load_rps = _num(fault, "load_rps")


def end(world: World, fault: Fault, base_load_rps: float) -> None:
    """Take the fault out of the world at its end: replicas that were down load their model first."""
    region = world.regions[fault.region] if fault.region else None
    if fault.kind in ("down", "capacity_loss"):
        assert region is not None
        region.gateway_up = True
        for r in region.replicas:
            if r.state == "down":
                region.bring_back(r, world.now_s)
    elif fault.kind == "slow":
        assert region is not None
        for r in region.replicas:
            r.ttft_factor = 1.0
    elif fault.kind == "errors":
        assert region is not None
        for r in region.replicas:
            r.error_p = 0.0
    elif fault.kind == "flapping":
        assert region is not None
        for r in region.replicas:
            r.error_p = 0.0
    elif fault.kind == "partition":
        world.partitioned.discard(str(fault.params["vantage"]))
    elif fault.kind == "surge":
        world.load_rps = base_load_rps


def flap(world: World, fault: Fault) -> None:
    """Flapping replicas crash-loop: failing for `down_s`, serving for `up_s`, from the fault's start.

    A crash-looping replica stays in the endpoints until its readiness probe catches up, so while it
    is failing it answers what it is sent with errors rather than leaving the pool."""
    assert fault.region is not None
    down_s, up_s = _num(fault, "down_s"), _num(fault, "up_s")
    failing = (world.now_s - fault.start_s) % (down_s + up_s) < down_s
    for replica in world.regions[fault.region].replicas[: int(_num(fault, "replicas"))]:
        replica.error_p = 1.0 if failing else 0.0


def advance(world: World, faults: list[Fault], now_s: float, base_load_rps: float) -> None:
    """Start and end the faults whose time falls in [world.now_s, now_s): the world then steps to now_s."""
    before_s = world.now_s
    for fault in faults:
        if before_s <= fault.start_s < now_s:
            start(world, fault)
        if fault.end_s is not None and before_s <= fault.end_s < now_s:
            end(world, fault, base_load_rps)
        active = fault.start_s <= before_s and (fault.end_s is None or before_s < fault.end_s)
        if fault.kind == "flapping" and active:
            flap(world, fault)
