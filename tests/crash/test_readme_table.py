"""docs/tests.md's "Kill points" table lists exactly the kill points and restarts the crash suite runs."""

from __future__ import annotations

from tests.crash.points import markdown_table
from tests.support.docs_text import page


def readme_table() -> str:
    text = page("docs/tests.md")
    start = text.index("## Kill points")
    lines = text[start:].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("| operation"))
    rows = []
    for line in lines[first:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return "\n".join(rows)


def test_readme_kill_point_table_matches_the_suite() -> None:
    assert readme_table() == markdown_table(), (
        "docs/tests.md's Kill points table drifted from tests/crash/points.py; paste markdown_table()'s output"
    )
