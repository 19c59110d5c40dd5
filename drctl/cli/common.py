"""Shared CLI plumbing: config loading, the user-error type, async running, output modes,
and the options every command spells the same way (--output, --dry-run, --yes)."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from rich.console import Console

from drctl.cli.durations import seconds  # typer's help renders with rich: no extra cost for -h

# Imported where a command runs, not here: every command module imports this one, and help and Tab
# completion must not pay for pydantic's models (docs/operations.md, bench/cli_latency.py).
if TYPE_CHECKING:
    from drctl.config.schema import FleetConfig

T = TypeVar("T")

# Piped or redirected, rich would cut every table at 80 columns (its default without a terminal);
# a script or grep needs the values whole, so without a terminal lines are as long as they are.
PIPED_WIDTH = 10_000


class SafeConsole(Console):
    """A Console that shows no control, C1 or bidi character raw, whatever a command passes it.

    Every string it renders goes through drctl.models.safe_text first (newlines kept: the command's
    own lines), so a value from a file that a renderer forgot to escape still cannot repaint the
    screen or write the clipboard. Rich markup in such values is escaped where they are interpolated
    (`shown`), or printed with markup=False.
    """

    def __init__(self, stderr: bool = False) -> None:
        stream = sys.stderr if stderr else sys.stdout
        super().__init__(stderr=stderr, width=None if stream.isatty() else PIPED_WIDTH)

    def render_str(self, text: str, **kwargs: Any) -> Any:
        from rich.errors import MarkupError

        from drctl.models.safe_text import safe_text

        text = safe_text(text, keep_newlines=True)
        try:
            return super().render_str(text, **kwargs)
        except MarkupError:  # a value with `[/]` that no renderer escaped: shown as written, not a crash
            return super().render_str(text, **(kwargs | {"markup": False}))

    def print(self, *objects: Any, **kwargs: Any) -> None:
        from rich.text import Text

        from drctl.models.safe_text import safe_text

        # A Text built by a renderer skips render_str; one style over it all is rebuilt escaped.
        fixed = [
            Text(safe_text(o.plain, keep_newlines=True), style=o.style)
            if isinstance(o, Text) and not o.spans and safe_text(o.plain, keep_newlines=True) != o.plain
            else o
            for o in objects
        ]
        super().print(*(_folded(o) for o in fixed), **kwargs)


def _folded(obj: Any) -> Any:
    """A table whose cells fold instead of ending in an ellipsis: at a narrow terminal a long value
    (an image reference, a URL) wraps onto more lines, whole, and is never cut."""
    from rich.console import Group
    from rich.table import Table

    if isinstance(obj, Group):
        for inner in obj.renderables:
            _folded(inner)
    elif isinstance(obj, Table):
        for column in obj.columns:
            if column.overflow == "ellipsis":
                column.overflow = "fold"
    return obj


def shown(value: Any) -> str:
    """A value from a file or a config, ready to interpolate into a rich markup string.

    Control, C1 and bidi characters become visible escapes and rich markup (`[/]` in a URL) is
    escaped, so it shows as written and can neither crash the renderer nor restyle the line.
    """
    from rich.markup import escape

    from drctl.models.safe_text import safe_text

    return escape(safe_text(value))


console = SafeConsole()
err_console = SafeConsole(stderr=True)

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Fleet config file. Without it: --fleet NAME, DRCTL_CONFIG, DRCTL_FLEET, the current "
        "context, then ~/.config/drctl/fleet.yaml (drctl config get-contexts).",
        show_default=False,
    ),
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
NoWait = Annotated[
    bool,
    typer.Option(
        "--no-wait",
        help="Start and return; follow it with `drctl ops watch ID`, `drctl ops show ID` or in the UI.",
    ),
]

Timeout = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        parser=seconds("--timeout"),
        metavar="DURATION",
        help="Stop waiting after DURATION (90, 90s, 5m, 1h30m) and exit 4; the operation keeps running "
        "(`drctl ops watch ID`).",
    ),
]


# The defaults every command gives its --config and --output, stated once. No --config: the fleet
# is found by drctl.cli.contexts.resolve (--fleet, env, context, default).
CONFIG: Path | None = None
TABLE = Output.table


class UserError(Exception):
    """A mistake the user can fix. Rendered without a traceback; exit code 2 unless given."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def fail(message: str, exit_code: int = 2) -> NoReturn:
    raise UserError(message, exit_code)


def config_path(flag: Path | None) -> Path:
    """The fleet config file a command uses: -c, else --fleet, env, context, default (contexts.py)."""
    return _resolved(flag).path


def _resolved(flag: Path | None) -> Any:
    from drctl.cli import selection
    from drctl.cli.contexts import CHECKOUT_DEFAULT, config_dir, resolve

    found = resolve(flag, selection.fleet_flag)
    if found.source == "default" and not found.path.exists():
        raise UserError(
            f"no fleet config: pass -c FILE or --fleet NAME, set DRCTL_CONFIG or DRCTL_FLEET, choose a "
            f"context (drctl config use-context NAME), or write {config_dir() / 'fleet.yaml'} "
            f"({CHECKOUT_DEFAULT} is used in a drctl checkout)"
        )
    return found


def load(flag: Path | None) -> FleetConfig:
    """The fleet config (config_path), with the context's Temporal address and namespace over its own."""
    from drctl.config.schema import load_config

    found = _resolved(flag)
    cfg = load_config(found.path)
    ctx = found.context
    if ctx is not None and (ctx.temporal_address or ctx.temporal_namespace):
        over = {"address": ctx.temporal_address, "namespace": ctx.temporal_namespace}
        temporal = cfg.temporal.model_copy(update={k: v for k, v in over.items() if v})
        cfg = cfg.model_copy(update={"temporal": temporal})
    return cfg


def run_async(fn: Callable[[], Awaitable[T]]) -> T:
    import asyncio

    return asyncio.run(fn())  # type: ignore[arg-type]


def print_json(data: Any, output: Output = Output.json) -> None:
    """`data` as JSON, or with `output` yaml as the same document in YAML (it is JSON first, so the
    two never differ: datetimes, enums and models turn into the same strings and objects)."""
    text = json.dumps(data, indent=2, default=str)
    if output is Output.yaml:
        import yaml

        from drctl.models.safe_text import safe_text

        # JSON writes every control and bidi character as \\uXXXX; YAML only its own non-printables,
        # so a document holding any is written all-ASCII, escaped the same way.
        raw = json.dumps(data, ensure_ascii=False, default=str)
        readable = safe_text(raw, keep_newlines=True) == raw
        text = yaml.safe_dump(json.loads(text), sort_keys=False, allow_unicode=readable).rstrip("\n")
    sys.stdout.write(text + "\n")


def is_document(output: Output) -> bool:
    """--output json or yaml: stdout carries one document, for a script to read."""
    return output is not Output.table


def plain(value: Any) -> Any:
    from pydantic import BaseModel

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
    from drctl.models.safe_text import safe_text

    body = [plain(p) for p in plan] if isinstance(plan, list) else plain(plan)
    doc = {"dry_run": True, "workflow_id": workflow_id, "plan": body}
    if printed_json(output, doc):
        return
    console.print(f"[bold]dry run[/] (nothing started, nothing changed): {title}")
    for key, value in rows:
        console.print(f"  {key:<20} {safe_text(value)}", markup=False, highlight=False, soft_wrap=True)
