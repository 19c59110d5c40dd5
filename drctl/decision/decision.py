"""The core's output: what to do, the target weights, and why."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from drctl.decision.evidence import Verdict

Action = Literal["hold", "shed", "return", "failover", "failback", "reconcile"]


class Decision(BaseModel):
    """One tick's decision (docs/decisions.md, Reading a decision)."""

    model_config = ConfigDict(extra="forbid")

    action: Action = Field(description="What the decision does.")
    weights_before: dict[str, int] = Field(description="The weights the decision started from.")
    weights_after: dict[str, int] = Field(
        description="Target weights: every configured region a key, sum 100 over those that can serve."
    )
    verdicts: dict[str, Verdict] = Field(description="Region -> its verdict this tick.")
    reasons: list[str] = Field(default_factory=list, description="The rule's own words, naming the rule.")
    rule: str = Field(description="The rule id from the rules table that decided.")
    evidence: dict[str, dict[str, float | int | str]] = Field(
        default_factory=dict, description="Region -> the figures the decision used."
    )
    urgent: bool = Field(False, description="The caller should tick again soon (a move is under way).")
    superseded: list[str] = Field(default_factory=list, description="Operation kinds this decision replaces.")
    advisory: bool = Field(
        False, description="Decided and reported but not to be applied (policy manual or mode advise)."
    )

    @property
    def moves(self) -> bool:
        """Whether the target weights differ from the weights before."""
        return self.weights_after != self.weights_before
