"""Every alert links its runbook section, and each section says what it means, what to check and
which real drctl commands fix it."""

from __future__ import annotations

import re
from pathlib import Path

import typer
import yaml

from drctl.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
RULES = yaml.safe_load((ROOT / "deploy" / "prometheus" / "drctl-rules.yaml").read_text())
RUNBOOKS = (ROOT / "docs" / "runbooks.md").read_text()


def _alerts() -> list[dict]:
    return [r for g in RULES["groups"] for r in g["rules"] if "alert" in r]


def _sections() -> dict[str, str]:
    parts = re.split(r"^## (\w+)\n", RUNBOOKS, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_alert_links_its_own_runbook_section() -> None:
    sections = _sections()
    for rule in _alerts():
        name = rule["alert"]
        assert rule["annotations"].get("runbook_url") == f"docs/runbooks.md#{name.lower()}", name
        assert name in sections, f"docs/runbooks.md has no section for {name}"
    assert set(sections) == {r["alert"] for r in _alerts()}, "a runbook for an alert that does not exist"


def test_every_runbook_says_what_it_means_what_to_check_and_how_to_fix() -> None:
    for name, text in _sections().items():
        for part in ("**What it means.**", "**What to check.**", "**Fix.**"):
            assert part in text, f"{name}: no {part}"
        fix = text.split("**Fix.**", 1)[1]
        assert re.search(r"`drctl [^`]+`", fix), f"{name}: the fix names no drctl command"


def test_every_drctl_command_in_the_runbooks_exists_with_its_options() -> None:
    root = typer.main.get_command(app)
    for span in re.findall(r"`(drctl [^`]+)`", RUNBOOKS):
        words = " ".join(span.split()).split()[1:]
        cmd, i = root, 0
        while i < len(words) and hasattr(cmd, "commands") and words[i] in cmd.commands:
            cmd = cmd.commands[words[i]]
            i += 1
        assert i and not hasattr(cmd, "commands"), f"not a drctl command: {span}"
        known = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for word in words[i:]:
            if word.startswith("-"):
                assert word in known, f"{span}: {word} is not an option of drctl {' '.join(words[:i])}"
