"""Every alert links its runbook section, and each section says what it means, what to check and
which real drctl commands fix it."""

from __future__ import annotations

import re
from pathlib import Path

import typer
import yaml

from drctl.cli.main import app
from drctl.config.reference import SCHEMA_ID

ROOT = Path(__file__).resolve().parents[1]
RULES = yaml.safe_load((ROOT / "deploy" / "prometheus" / "drctl-rules.yaml").read_text())
RUNBOOKS = (ROOT / "docs" / "runbooks.md").read_text()
# The published docs: a notification's link must open in a browser, so it is absolute.
RUNBOOK_BASE = "https://github.com/drctl/drctl/blob/main/docs/runbooks.md"


def _alerts() -> list[dict]:
    return [r for g in RULES["groups"] for r in g["rules"] if "alert" in r]


def _sections() -> dict[str, str]:
    parts = re.split(r"^## (\w+)\n", RUNBOOKS, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_alert_links_its_own_runbook_section() -> None:
    sections = _sections()
    for rule in _alerts():
        name = rule["alert"]
        assert rule["annotations"].get("runbook_url") == f"{RUNBOOK_BASE}#{name.lower()}", name
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


def test_the_runbook_base_is_documented_and_the_notifications_link_it() -> None:
    # The base is the same one the config schema's $id uses, and the runbooks page names it.
    assert SCHEMA_ID.rsplit("/docs/", 1)[0] == RUNBOOK_BASE.rsplit("/docs/", 1)[0]
    assert f"`{RUNBOOK_BASE}#<alert name in lower case>`" in " ".join(RUNBOOKS.split())
    receivers = yaml.safe_load((ROOT / "deploy" / "alertmanager" / "alertmanager.yml").read_text())[
        "receivers"
    ]
    for r in receivers:
        configs = [c for key, cs in r.items() if key.endswith("_configs") for c in cs]
        assert configs and all("Annotations.runbook_url" in yaml.safe_dump(c) for c in configs), r["name"]
