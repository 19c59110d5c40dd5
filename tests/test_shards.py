"""The Makefile's four test shards take every test exactly once: each `-m` expression of `make test`,
`test-e2e`, `test-stacks` and `test-crash` is evaluated on every collected test's marks (those
tests/conftest.py adds included), in one collection run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARDS = ("test", "test-e2e", "test-stacks", "test-crash")

PLUGIN = """
import json, pytest
from _pytest.mark.expression import Expression

EXPRS = json.loads({exprs!r})
OUT = {out!r}

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    rows = []
    for item in items:
        names = {{m.name for m in item.iter_markers()}}
        has = lambda n, **_: n in names
        rows.append([item.nodeid, [t for t, e in EXPRS.items() if Expression.compile(e).evaluate(has)]])
    with open(OUT, "w") as f:
        json.dump(rows, f)
"""


def _expressions() -> dict[str, str]:
    text = (ROOT / "Makefile").read_text()
    found = {}
    for target in SHARDS:
        recipe = re.search(rf"^{re.escape(target)}:.*\n\t(.*)$", text, re.M)
        assert recipe, f"Makefile has no target {target}"
        expr = re.search(r'-m "([^"]+)"', recipe[1]) or re.search(r"-m (\w+)", recipe[1])
        assert expr, f"{target}: no -m expression in {recipe[1]!r}"
        found[target] = expr[1]
    return found


def test_every_test_is_in_exactly_one_shard(tmp_path: Path) -> None:
    exprs, out = _expressions(), tmp_path / "shards.json"
    (tmp_path / "shard_plugin.py").write_text(PLUGIN.format(exprs=json.dumps(exprs), out=str(out)))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "shard_plugin", "-p", "no:randomly"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(out.read_text())
    assert len(rows) > 1000, len(rows)
    wrong = {nodeid: shards for nodeid, shards in rows if len(shards) != 1}
    assert not wrong, dict(list(wrong.items())[:20])
    # Each shard has tests, and the session-stack and crash tests are where the docs say.
    taken = {t: [n for n, s in rows if s == [t]] for t in SHARDS}
    assert all(taken.values()), {t: len(v) for t, v in taken.items()}
    assert all(n.startswith("tests/workflows/") for n in taken["test-e2e"])
    assert all(n.startswith("tests/crash/") for n in taken["test-crash"])
