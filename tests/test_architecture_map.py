"""docs/architecture.md, "Where each behaviour lives": every path it names exists, every name is defined.

A row's file(s) cell is backticked paths, each optionally followed by backticked names in
parentheses (`workflows/monitor.py` (`FleetMonitor._decide`)); a name belongs to the path before it.
"""

from __future__ import annotations

import re

import pytest

from tests.support.docs_text import ROOT, page, section

HEADING = "## Where each behaviour lives"


def rows(text: str) -> list[tuple[str, str]]:
    """(behaviour, file(s) cell) for each row of the section's table, header and rule left out."""
    out = []
    for line in section(text, HEADING).splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in ("behaviour", "---") or set(cells[0]) <= {"-", ":"}:
            continue
        assert len(cells) == 2, f"row is not `behaviour | file(s)`: {line}"
        out.append((cells[0], cells[1]))
    return out


def entries(cell: str) -> list[tuple[str, list[str]]]:
    """The cell's paths, each with the names given for it: `a.py` (`X`, `Y.z`), `dir/` -> pairs."""
    out: list[tuple[str, list[str]]] = []
    for m in re.finditer(r"`([^`]+)`(\s*\(([^)]*)\))?", cell):
        names = re.findall(r"`([^`]+)`", m.group(3) or "")
        out.append((m.group(1), names))
    return out


def defines(source: str, name: str) -> bool:
    """True if the source has `def name`, `class name` or a module-level `name =` / `name:`."""
    n = re.escape(name)
    return bool(
        re.search(rf"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+{n}\b", source, re.M)
        or re.search(rf"^{n}[ \t]*[:=]", source, re.M)
    )


def problems(text: str) -> list[str]:
    """Every path of the map that names no file, and every name its file does not define."""
    found = []
    for behaviour, cell in rows(text):
        listed = entries(cell)
        if not listed:
            found.append(f"{behaviour}: no path")
        for path, names in listed:
            target = ROOT / path
            if not target.exists() or (path.endswith("/") and not target.is_dir()):
                found.append(f"{behaviour}: no {path}")
                continue
            if names and target.suffix != ".py":
                found.append(f"{behaviour}: names given for {path}, not a Python file")
                continue
            source = target.read_text() if names else ""
            for name in names:
                for part in name.split("."):
                    if not defines(source, part):
                        found.append(f"{behaviour}: {path} defines no {part} (of `{name}`)")
    return found


def test_map_has_rows() -> None:
    assert len(rows(page("docs/architecture.md"))) >= 20


def test_every_path_exists_and_every_name_is_defined() -> None:
    assert problems(page("docs/architecture.md")) == []


@pytest.mark.parametrize(
    "row, wanted",
    [
        ("| Nothing | `workflows/no_such_file.py` |", "no workflows/no_such_file.py"),
        ("| Nothing | `drctl/no_such_dir/` |", "no drctl/no_such_dir/"),
        ("| Nothing | `workflows/monitor.py` (`FleetMonitor._no_such`) |", "defines no _no_such"),
        ("| Nothing | `workflows/monitor.py` (`NoSuchClass.run`) |", "defines no NoSuchClass"),
    ],
)
def test_a_wrong_row_is_caught(row: str, wanted: str) -> None:
    text = f"# A\n\n{HEADING}\n\n| behaviour | file(s) |\n| --- | --- |\n{row}\n"
    found = problems(text)
    assert len(found) == 1 and wanted in found[0], found
