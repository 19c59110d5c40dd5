"""docs/supported-versions.md: every command it shows is run, and every version it prints in bold
is in the output of its row's commands, so the table cannot drift from what is installed here."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "supported-versions.md"
COMPONENTS = {
    "Kubernetes", "Gateway API", "Velero", "HAProxy", "vLLM", "Temporal server", "Chaos Toolkit", "rclone",
}  # fmt: skip


def _rows() -> list[list[str]]:
    rows = []
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 4 and cells[0] not in ("Component", "---"):
            rows.append(cells)
    return rows


@functools.cache
def _output(command: str) -> str:
    done = subprocess.run(shlex.split(command), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{command!r} exited {done.returncode}: {done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def test_table_names_every_component() -> None:
    rows = _rows()
    assert COMPONENTS <= {r[0] for r in rows}
    assert all(r[1] and r[2] for r in rows)


@pytest.mark.parametrize("row", [pytest.param(r, id=r[0]) for r in _rows() if "`" in r[3]])
def test_each_rows_commands_print_its_versions_in_bold(row: list[str]) -> None:
    _component, tested, _how, command = row
    commands = re.findall(r"`([^`]+)`", command)
    for cmd in commands:
        # Resolved from the repository root, as the page says: ../shared is beside the clone.
        binary = ROOT / shlex.split(cmd)[0]
        if cmd.startswith("../shared/") and not binary.exists():
            pytest.skip(f"{binary.resolve()} is not here (a user's clone has no ../shared/tools)")
    said = "".join(_output(c) for c in commands)
    versions = re.findall(r"\*\*([^*]+)\*\*", tested)
    assert versions, "a row with a command bolds the versions it prints"
    missing = [v for v in versions if v not in said]
    assert not missing, f"{commands} do not print {missing}:\n{said}"
