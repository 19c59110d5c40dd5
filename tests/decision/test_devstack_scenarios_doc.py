"""docs/decisions.md's dev-stack scenario table names tests that exist: a renamed or deleted test
fails here rather than leaving the table pointing at nothing."""

from __future__ import annotations

import ast
import re

from tests.support.config import REPO
from tests.support.docs_text import page, section

ROWS = re.compile(r"^\| `(?P<family>[^`]+)` \|.*\| `(?P<test>tests/[\w/]+\.py::\w+)` \|$", re.M)


def _tests() -> list[tuple[str, str]]:
    text = section(page("docs/decisions.md"), "## The same worlds on the dev stack")
    return [(m["family"], m["test"]) for m in ROWS.finditer(text)]


def test_every_row_names_a_test_function_that_exists() -> None:
    rows = _tests()
    assert len(rows) >= 12, rows
    for _, ref in rows:
        path, name = ref.split("::")
        tree = ast.parse((REPO / path).read_text())
        names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        assert name in names, f"docs/decisions.md names {ref}, which does not exist"


def test_the_simulator_families_with_a_dev_stack_test_are_named_as_the_simulator_names_them() -> None:
    from drctl.simulation.scenarios import FAMILIES

    named = {family for family, _ in _tests()}
    assert named & set(FAMILIES) >= {
        "down",
        "cascade",
        "capacity_loss",
        "slow",
        "errors",
        "partition",
        "tier_restart",
    }
