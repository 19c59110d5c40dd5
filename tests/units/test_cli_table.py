"""The CLI's command table (what `--help` and completion show without importing anything) is the truth."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import typer

from drctl.cli.main import COMMANDS, app, invoke, module_command

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("temporalio", "kubernetes", "boto3", "botocore", "httpx", "drctl.config", "drctl.cli.common")


def test_every_listed_command_is_defined_by_its_module_with_the_listed_help() -> None:
    for name, (_, help_line) in COMMANDS.items():
        command = module_command(name)
        assert command.name == name
        assert command.get_short_help_str(limit=300) == help_line, name


def test_no_module_defines_a_command_the_table_leaves_out() -> None:
    holder = typer.Typer()
    for module in {mod for mod, _ in COMMANDS.values()}:
        holder.add_typer(importlib.import_module(f"drctl.cli.{module}").app)
    assert set(typer.main.get_group(holder).commands) == set(COMMANDS)


def test_an_unknown_command_is_a_usage_error() -> None:
    assert typer.main.get_group(app).get_command(typer.Context(typer.main.get_group(app)), "nope") is None
    assert invoke(["nope"]) == 2


def _imported_after(argv: list[str]) -> set[str]:
    code = (
        "import os, sys, json; sys.argv = ['drctl', *json.loads(sys.argv[1])]\n"
        "os._exit = sys.exit  # run() leaves through os._exit, which skips atexit\n"
        "from drctl.cli.entry import run\n"
        "import atexit; atexit.register(lambda: print('MODULES', ' '.join(sys.modules), file=sys.stderr))\n"
        "run()"
    )
    import json

    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(argv)], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(ln for ln in done.stderr.splitlines() if ln.startswith("MODULES "))
    return set(line.split()[1:])


def test_version_and_help_import_no_client_library() -> None:
    # Every Tab completion and `--version` paid for the Temporal, Kubernetes and AWS clients (1.4 s).
    for argv in (["--version"], ["--help"]):
        heavy = sorted(m for m in _imported_after(argv) if m.split(".")[0] in HEAVY or m.startswith(HEAVY))
        assert heavy == [], (argv, heavy)
