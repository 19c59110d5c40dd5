"""docs/decisions.md stays true: its tables name every verdict, rule and invariant the code has,
and its example decision is what decide returns for the case it describes."""

from __future__ import annotations

import json
import re

from drctl.decision import Decision, DecisionConfig, Verdict
from drctl.decision.invariants import OVER_TRACE, PER_DECISION
from drctl.decision.rules import failover, reconcile, retreat, shed
from tests.decision.facts import W3, run, three_regions
from tests.support.docs_text import blocks, page, section

DOC = page("docs/decisions.md")
RULE_IDS = {failover.RULE, retreat.RULE, shed.RULE, "failback", "return", reconcile.RULE, "hold"}


def first_column(text: str) -> set[str]:
    return set(re.findall(r"^\| `?([\w]+)`? \|", text, re.M)) - {"verdict", "rule", "invariant"}


def test_the_verdict_table_names_every_verdict() -> None:
    assert first_column(section(DOC, "## Verdicts").split("### ")[0]) == {v.value for v in Verdict}


def test_the_rules_table_names_every_rule() -> None:
    assert first_column(section(DOC, "## Rules")) == RULE_IDS


def test_the_invariants_table_names_every_check() -> None:
    checks = {c.__name__ for c in (*PER_DECISION, *OVER_TRACE)}
    assert first_column(section(DOC, "## Invariants")) == checks


def test_the_example_is_the_decision_of_the_case_it_describes() -> None:
    (shown,) = blocks(DOC, "json")
    cfg = DecisionConfig(interval_s=10, failure_threshold=3, recovery_threshold=3, return_stable_s=30)
    steps = run(cfg, three_regions, 8, dict(W3))
    made = next(d for _, d in steps if d.action == "failover")
    assert Decision.model_validate(json.loads(shown)) == made
