"""The policies a simulated world is run with: drctl's decision core, and a plain baseline to beat.

Both answer one tick's evidence with a `Decision`, so the loop applies and records them alike. Only
the core's decisions are held to drctl.decision.invariants: the baseline is the yardstick, and
breaking them is what it is there to show.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from drctl.decision.config import DecisionConfig
from drctl.decision.decide import decide
from drctl.decision.decision import Decision
from drctl.decision.evidence import FleetEvidence, ProbeFacts, Verdict
from drctl.decision.memory import DecisionMemory, note_apply_failed
from drctl.simulation.scenarios import largest_remainder


class Policy(Protocol):
    name: str
    checked: bool  # whether its decisions must satisfy drctl.decision.invariants

    def decide(self, evidence: FleetEvidence, now: datetime) -> Decision: ...

    def apply_failed(self, now: datetime) -> None: ...


@dataclass
class CorePolicy:
    """drctl's decision core, with its memory carried from tick to tick as the monitor carries it."""

    config: DecisionConfig
    memory: DecisionMemory = field(default_factory=DecisionMemory)
    name: str = "core"
    checked: bool = True

    def decide(self, evidence: FleetEvidence, now: datetime) -> Decision:
        decision, self.memory = decide(evidence, self.memory, self.config, now)
        return decision

    def apply_failed(self, now: datetime) -> None:
        self.memory = note_apply_failed(self.memory, now, self.config.backoff_s)


def _check_failed(probe: ProbeFacts | None) -> bool:
    """A plain health check: no answer in time, or the gateway's completion failed."""
    return probe is None or not probe.answered or probe.ttft_ms is None


@dataclass
class BaselinePolicy:
    """Plain interval x threshold: `threshold` failed checks in a row take a region to 0, its share
    split over the others by home weight; `threshold` passed checks bring it back whole. It writes
    only when its own set of failed regions changes, and never reads capacity, load or votes."""

    threshold: int
    name: str = "baseline"
    checked: bool = False
    failures: dict[str, int] = field(default_factory=dict)
    passes: dict[str, int] = field(default_factory=dict)
    out: set[str] = field(default_factory=set)
    current: dict[str, int] | None = None

    def decide(self, evidence: FleetEvidence, now: datetime) -> Decision:
        home = {name: r.home_weight for name, r in evidence.regions.items()}
        before = self.current or dict(home)
        for name, region in evidence.regions.items():
            if _check_failed(region.probe):
                self.failures[name] = self.failures.get(name, 0) + 1
                self.passes[name] = 0
            else:
                self.passes[name] = self.passes.get(name, 0) + 1
                self.failures[name] = 0
        out = {n for n in home if self.failures.get(n, 0) >= self.threshold}
        out |= {n for n in self.out if self.passes.get(n, 0) < self.threshold}
        serving = {n: w for n, w in home.items() if n not in out and w > 0}
        verdicts = {n: Verdict.DOWN if n in out else Verdict.HEALTHY for n in home}
        if not serving:
            # Nothing left to receive: a plain policy keeps what it has rather than write all zeros.
            return Decision(
                action="hold", weights_before=before, weights_after=before, verdicts=verdicts, rule="baseline"
            )
        after = {n: 0 for n in home} | largest_remainder({n: float(w) for n, w in serving.items()})
        action = "hold" if after == before else ("failover" if out - self.out else "failback")
        self.out, self.current = out, after
        return Decision(
            action=action,
            weights_before=before,
            weights_after=after,
            verdicts=verdicts,
            rule="baseline",
            reasons=[f"baseline: out of rotation: {', '.join(sorted(out)) or 'none'}"],
        )

    def apply_failed(self, now: datetime) -> None:
        # A plain policy believes its write: it does not look back at the tier.
        return None
