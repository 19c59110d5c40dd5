"""The decision function: evidence and memory in, a decision and the new memory out."""

from __future__ import annotations

from datetime import datetime

from drctl.decision.config import DecisionConfig
from drctl.decision.decision import Decision
from drctl.decision.evidence import FleetEvidence
from drctl.decision.memory import DecisionMemory


def decide(
    evidence: FleetEvidence, memory: DecisionMemory, config: DecisionConfig, now: datetime
) -> tuple[Decision, DecisionMemory]:
    """The decision for this tick and the memory for the next. Never mutates its inputs."""
    raise NotImplementedError("decide: being written (issue 26)")
