"""drctl's decision core (issue 26): one pure function from evidence to a traffic decision.

Read docs/decisions.md for the verdicts, the rules and the invariants. Deviations from and additions
to the design contract (every name of the contract works as written):
- Verdicts: a region failing but short of failure_threshold is DEGRADED (suspect: keeps its share,
  never receives); at the threshold without the quorum it is UNKNOWN. A tick with no probe (or auth
  refused) leaves a DOWN or RECOVERING region as it is (a missed probe neither hides a dead region
  nor shortens a recovery); any other region is UNKNOWN.
- Reconcile composes: drifted weights are corrected (mode automatic) into the base the other rules
  start from, so a failover is not a tick late; the decision's rule is "reconcile" only when no
  other rule moves. Weights in effect that cannot be read: failover and retreat still go (from the
  weights applied), shed and return hold.
- `Decision.rule` is one of failover, retreat, shed, failback, return, reconcile, hold; a retreat's
  `action` is "failback" or "return" (the Action literal has no "retreat"). `superseded` lists the
  kinds of the operations replaced. Retreat, like failover, ignores the stability window.
- Additions: `DecisionConfig.breach_window_s`, `.degraded_failing_fraction`; `RegionMemory.emptied_by`,
  `.last_step_pct`, `.last_finished`; `Decision.advisory` (policy manual / mode advise: report, do
  not apply) and `.moves`; `note_apply_failed(memory, now, backoff_s)` starts the back-off;
  `decide.prepare` gives the judged tick the rules see.
- Invariants: `check_trace(steps)` takes `[(FleetEvidence, Decision), ...]`; `no_flapping` follows
  the non-advisory decisions' targets and exempts failover, retreat and reconcile; a DOWN region's
  RTO clock starts at its DOWN verdict, and policy manual is exempt (it only advises).
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
from drctl.decision.invariants import Violation, check_decision, check_trace
from drctl.decision.memory import DecisionMemory, RegionMemory, note_apply_failed
from drctl.decision.verdict import judge_region

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
    "Violation",
    "check_decision",
    "check_trace",
    "decide",
    "judge_region",
    "note_apply_failed",
]
