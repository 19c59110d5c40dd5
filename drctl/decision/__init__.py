"""drctl's decision core (issue 26): one pure function from evidence to a traffic decision.

Deviations from and additions to the design contract (docs: /work/design/decision-core.md):
- Additions only so far; every name of the contract works as written.
- `DecisionConfig` also has `breach_window_s` and `degraded_failing_fraction`.
- `RegionMemory` also has `emptied_by` and `last_step_pct` (failback vs return, and the retreat).
- `Decision` also has `advisory` (policy manual / mode advise: report, do not apply) and `moves`.
- `note_apply_failed(memory, now, backoff_s)` starts the back-off after a failed apply.
"""

from drctl.decision.config import DecisionConfig
from drctl.decision.decide import decide
from drctl.decision.decision import Action, Decision
from drctl.decision.evidence import (
    CapacityFacts,
    FleetEvidence,
    Operation,
    PassiveFacts,
    ProbeFacts,
    RegionEvidence,
    Verdict,
)
from drctl.decision.memory import DecisionMemory, RegionMemory, note_apply_failed

__all__ = [
    "Action",
    "CapacityFacts",
    "Decision",
    "DecisionConfig",
    "DecisionMemory",
    "FleetEvidence",
    "Operation",
    "PassiveFacts",
    "ProbeFacts",
    "RegionEvidence",
    "RegionMemory",
    "Verdict",
    "decide",
    "note_apply_failed",
]
