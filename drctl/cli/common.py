"""Shared CLI plumbing: config loading, the user-error type, async running, output modes,
and the options every command spells the same way (--output, --dry-run, --yes)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console

from drctl.config.schema import FleetConfig, load_config

T = TypeVar("T")

console = Console()
err_console = Console(stderr=True)

DEFAULT_CONFIG = "config/fleet.yaml"

ConfigOpt = Annotated[
    Path, typer.Option("--config", "-c", help="Fleet config file.", envvar="DRCTL_CONFIG", show_default=True)
]


class Output(str, Enum):
    table = "table"
    json = "json"
    yaml = "yaml"


OutputOpt = Annotated[
    Output, typer.Option("--output", "-o", help="Output format: yaml is the same document as json.")
]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Print what the workflow would do; start nothing, change nothing.")
]
YesOpt = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]

# The defaults every command gives its --config and --output, stated once.
CONFIG = Path(DEFAULT_CONFIG)
TABLE = Output.table


class UserError(Exception):
    """A mistake the user can fix. Rendered without a traceback; exit code 2 unless given."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def fail(message: str, exit_code: int = 2) -> NoReturn:
    raise UserError(message, exit_code)


def load(path: Path) -> FleetConfig:
    return load_config(path)


def run_async(fn: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(fn())  # type: ignore[arg-type]


def print_json(data: Any, output: Output = Output.json) -> None:
    """`data` as JSON, or with `output` yaml as the same document in YAML (it is JSON first, so the
    two never differ: datetimes, enums and models turn into the same strings and objects)."""
    text = json.dumps(data, indent=2, default=str)
    if output is Output.yaml:
        import yaml

        text = yaml.safe_dump(json.loads(text), sort_keys=False, allow_unicode=True).rstrip("\n")
    sys.stdout.write(text + "\n")


def is_document(output: Output) -> bool:
    """--output json or yaml: stdout carries one document, for a script to read."""
    return output is not Output.table


def plain(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def printed_json(output: Output, data: Any) -> bool:
    """With --output json or yaml, print `data` (plain data, a model or a list of models) and return True."""
    if not is_document(output):
        return False
    print_json([plain(v) for v in data] if isinstance(data, list) else plain(data), output)
    return True


# Exit code of a refused confirmation; errors.EXIT_USAGE (common cannot import errors: a cycle).
_EXIT_UNCONFIRMED = 2


def confirm(yes: bool, question: str, what: str) -> None:
    """Ask `question` before a command that moves traffic, deletes or overwrites, unless --yes.

    Without a terminal to ask on (CI, a pipe) and without --yes it refuses, exit 2: a script must
    say --yes, never have a prompt answered by whatever its stdin holds. `what` completes
    "refusing to ..." in that message.
    """
    if yes:
        return
    if not sys.stdin.isatty():
        raise UserError(
            f"refusing to {what} without confirmation: pass --yes (stdin is not a terminal)",
            _EXIT_UNCONFIRMED,
        )
    typer.confirm(question, abort=True)


def print_plan(
    output: Output, title: str, workflow_id: str | None, plan: Any, rows: list[tuple[str, str]]
) -> None:
    """A --dry-run: the input the workflow would be started with (JSON/YAML), or its gist as rows.

    The plan is the workflow's own input, built by the code that builds it for a real run, so what
    a dry run shows is what the workflow would be given. `workflow_id` is None for a command that
    writes declarative objects (a Velero Schedule), not a workflow; `plan` is then those objects.
    """
    body = [plain(p) for p in plan] if isinstance(plan, list) else plain(plan)
    doc = {"dry_run": True, "workflow_id": workflow_id, "plan": body}
    if printed_json(output, doc):
        return
    console.print(f"[bold]dry run[/] (nothing started, nothing changed): {title}")
    for key, value in rows:
        console.print(f"  {key:<20} {value}", markup=False, highlight=False, soft_wrap=True)
