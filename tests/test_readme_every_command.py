"""Each "every command ..." claim of README.md, checked against the CLI's own command table.

The README is read for every "every command" phrase; each must match one of CHECKS (the words that
follow it), so a new claim fails here until it has a check. The command set comes from the Typer
app (tests.support.cli.commands), never from a list kept here, so a new command that breaks a claim
fails too. In-process, against a config whose every endpoint is a closed loopback port.
"""

from __future__ import annotations

import importlib
import io
import re
import shlex
from collections.abc import Callable

import pytest

from drctl.cli.main import EPILOG
from tests.support.cli import commands, options_of, run_cli
from tests.support.config import write_fleet_config
from tests.support.docs_text import README, ROOT

Path_ = tuple[str, ...]
TEXT = " ".join(README.read_text().split())  # one line: a claim may wrap anywhere

# Commands that take --yes but never ask, and why (they take it as their siblings do).
YES_NEVER_ASKS = {
    ("upgrade", "pause"): "holds the current weights; moves no traffic",
    ("upgrade", "resume"): "goes on with the steps already confirmed when the upgrade started",
}
# Commands that change the fleet (they take --dry-run) and do not ask, and why.
CHANGES_WITHOUT_ASKING = {
    ("backup", "create"): "adds a backup; moves no traffic and overwrites nothing",
    ("backup", "schedule", "create"): "adds a backup schedule; moves no traffic",
}
# A command named by one of these verbs stops protection, discards or runs at once: it asks.
ASKING_VERBS = {"stop", "abort", "delete", "trigger", "promote"}
# The prose items of the list, matched against command paths.
PROSE = {
    "schedule deletes": lambda p: "schedule" in p and p[-1] == "delete",
    "triggers": lambda p: "schedule" in p and p[-1] == "trigger",
}


def _claim(after: str) -> str:
    """The README sentence part that starts with "every command" followed by `after`."""
    m = re.search(rf"every command {re.escape(after)}[^.]*\.", TEXT, re.IGNORECASE)
    assert m, f"README no longer says 'every command {after}'"
    return m.group(0)


def _asking(tree: dict[Path_, object]) -> tuple[set[Path_], dict[Path_, set[str]]]:
    """The commands README says ask first, and the options that make them ask (`migrate --decommission`)."""
    inner = re.search(r"asks first \(([^)]*)\)", _claim("that moves traffic"))
    assert inner, "the list of commands that ask first is gone"
    named: set[Path_] = set()
    conditions: dict[Path_, set[str]] = {}
    items = re.split(r",\s*|\s+and\s+", inner.group(1))
    for item in filter(None, (i.strip() for i in items)):
        if not item.startswith("`"):
            match = PROSE.get(item)
            assert match, f"README names {item!r} among the commands that ask: add it to PROSE"
            found = {p for p in tree if match(p)}
            assert found, f"{item!r} matches no command"
            named |= found
            continue
        words = shlex.split(item.strip("`"))
        head = [w for w in words if not w.startswith("-")]
        # `upgrade promote|abort`: one command per alternative of its last word.
        for last in head[-1].split("|"):
            path = (*head[:-1], last) if (*head[:-1], last) in tree else tuple(head[:-1])
            assert path in tree, f"README names `{item}`, which is no command"
            named.add(path)
            opts = {w for w in words if w.startswith("--")}
            missing = opts - set(options_of(tree[path]))
            assert not missing, f"`{item}`: {' '.join(path)} has no {missing}"
            if opts:
                conditions[path] = opts
    return named, conditions


def test_every_command_that_moves_traffic_asks_first_and_yes_skips() -> None:
    tree = commands()
    named, _ = _asking(tree)
    with_yes = {p for p, c in tree.items() if {"--yes", "-y"} <= set(options_of(c))}
    assert named <= with_yes, f"named as asking but without --yes/-y: {named - with_yes}"
    unexplained = with_yes - named - set(YES_NEVER_ASKS)
    assert not unexplained, f"take --yes, not in README's list of commands that ask: {unexplained}"
    changes = {p for p, c in tree.items() if "--dry-run" in options_of(c)}
    silent = changes - named - set(CHANGES_WITHOUT_ASKING)
    assert not silent, f"change the fleet (--dry-run) but are not in README's list: {silent}"
    by_verb = {p for p in tree if p[-1] in ASKING_VERBS} - named
    assert not by_verb, f"stop, abort, delete, trigger or promote without asking first: {by_verb}"


@pytest.fixture
def no_terminal(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    return str(write_fleet_config())


@pytest.mark.parametrize("path", sorted(YES_NEVER_ASKS), ids=" ".join)
def test_a_command_that_takes_yes_and_never_asks_goes_on_without_a_terminal(
    path: Path_, no_terminal: str
) -> None:
    """Not refused (exit 2) without a terminal: it reaches Temporal, a closed port (exit 3)."""
    code, out, err = run_cli([*path, "u1", "-c", no_terminal])
    assert code == 3 and "refusing" not in err and "cannot reach Temporal" in err, (out, err)


def test_every_command_that_starts_an_operation_takes_no_wait_and_timeout() -> None:
    _claim("that starts an operation")
    tree = commands()
    waits = {p for p, c in tree.items() if "--no-wait" in options_of(c)}
    lacking = {p for p in waits if not {"--timeout", "-o"} <= set(options_of(tree[p]))}
    assert not lacking, f"--no-wait without --timeout or -o: {lacking}"
    # A command that changes the fleet starts an operation, except a schedule's: a schedule is
    # created, deleted or triggered at once, and the drill it triggers is watched with `ops watch`.
    starts = {p for p, c in tree.items() if "--dry-run" in options_of(c) and "schedule" not in p}
    assert starts <= waits, f"start an operation without --no-wait: {starts - waits}"


def test_every_command_exits_with_the_codes_drctl_help_gives() -> None:
    _claim("exits with the same codes")
    section = README.read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented = {int(c) for c in re.findall(r"^\| (\d) \|", section, re.MULTILINE)}
    in_help = {int(c) for c in re.findall(r"(?:[:;]) (\d) ", EPILOG)}
    assert documented == in_help == {0, 1, 2, 3, 4}, (documented, in_help)
    code, out, _ = run_cli(["--help"])
    assert code == 0 and "Exit codes, the same for every command" in " ".join(out.split())


def test_the_failure_matrix_runs_every_command() -> None:
    claim = _claim("with Temporal down")
    assert "tests/test_cli_failure_matrix.py" in TEXT.split(claim)[0][-200:] + claim
    matrix = importlib.import_module("tests.test_cli_failure_matrix")
    assert set(commands()) == set(matrix.ARGS) | set(matrix.LEFT_OUT)


def test_options_every_command_shares_are_on_every_command() -> None:
    _claim("shares")
    page = (ROOT / "docs" / "operations.md").read_text()
    assert "## Options every command shares" in page
    no_help = [" ".join(p) for p in commands() if "Usage:" not in run_cli([*p, "-h"])[1]]
    assert not no_help, f"-h is not help on {no_help}"


CHECKS: dict[str, Callable[..., None]] = {
    "that moves traffic": test_every_command_that_moves_traffic_asks_first_and_yes_skips,
    "that starts an operation": test_every_command_that_starts_an_operation_takes_no_wait_and_timeout,
    "exits with the same codes": test_every_command_exits_with_the_codes_drctl_help_gives,
    "with Temporal down": test_the_failure_matrix_runs_every_command,
    "shares": test_options_every_command_shares_are_on_every_command,
}


def test_every_every_command_claim_has_a_check() -> None:
    claims = re.findall(r"every command ([^.|]*)", TEXT, re.IGNORECASE)
    assert claims
    unchecked = [c for c in claims if not any(c.startswith(k) for k in CHECKS)]
    assert not unchecked, f"README claims with no check in CHECKS: {unchecked}"
