"""The one table from exception type to exit code and message, used by every command.

Exit codes, the same for every command (README, `drctl --help`): 0 succeeded; 1 ran and did not
succeed; 2 usage or validation error, or a confirmation refused without a terminal; 3 nothing
started: the fleet is busy, or Temporal is unreachable; 4 still running: --timeout passed while
waiting, and the operation goes on.
"""

from __future__ import annotations

from collections.abc import Callable

import typer
from temporalio.client import WorkflowFailureError

from drctl.chaos.validate import ExperimentInvalid
from drctl.cli.common import UserError, err_console
from drctl.client.connection import TemporalConfigError, TemporalUnreachable
from drctl.client.identity import IdentityError
from drctl.client.operations import FleetBusyError
from drctl.config.schema import ConfigError, UnknownRegionError
from drctl.models.safe_text import safe_text

SHOWN_PROBLEMS = 50  # as drctl.config.schema lists them; a config with more is the wrong file

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_STARTED, EXIT_STILL_RUNNING = 0, 1, 2, 3, 4


class StillRunning(Exception):
    """`--timeout` passed while waiting for an operation: the wait ends, the operation goes on."""

    def __init__(self, workflow_id: str, link: str, waited_s: float, follow: str = "watch") -> None:
        where = f"`drctl ops {follow} {workflow_id}`" + (f" or {link}" if link else "")
        super().__init__(f"{workflow_id} is still running after {waited_s:g} s; follow it with {where}")
        self.workflow_id = workflow_id


def _text(exc: BaseException) -> str:
    return safe_text(exc)


def _config(exc: BaseException) -> str:
    """One line for one problem (what a command that only loads the config needs); the list for more,
    one line per problem: a value quoted in a message cannot add a line of its own."""
    assert isinstance(exc, ConfigError)
    lines = [
        f"{f'line {p.line}: ' if p.line else ''}{safe_text(p.path)}: {safe_text(p.message)}"
        for p in exc.problems
    ]
    if len(lines) == 1:
        return f"invalid config {safe_text(exc.file)}: {lines[0]}"
    shown = lines[:SHOWN_PROBLEMS]
    more = [f"... and {len(lines) - len(shown)} more"] if len(lines) > len(shown) else []
    head = f"invalid config {safe_text(exc.file)}: {len(lines)} problem(s)"
    return "\n  - ".join([head, *shown]) + "".join(f"\n  {m}" for m in more)


def _cause(exc: BaseException) -> str:
    return safe_text(f"the operation ended without a result: {getattr(exc, 'cause', None) or exc}")


# First match wins (subclasses before their bases). A UserError carries its own exit code.
ERRORS: tuple[tuple[type[BaseException], int, Callable[[BaseException], str]], ...] = (
    (UserError, EXIT_USAGE, _text),
    (TemporalConfigError, EXIT_USAGE, _text),
    (IdentityError, EXIT_USAGE, _text),
    (ConfigError, EXIT_USAGE, _config),
    (UnknownRegionError, EXIT_USAGE, _text),
    (ExperimentInvalid, EXIT_USAGE, lambda exc: f"invalid experiment {safe_text(exc)}"),
    (FleetBusyError, EXIT_NOT_STARTED, _text),
    (TemporalUnreachable, EXIT_NOT_STARTED, _text),
    (StillRunning, EXIT_STILL_RUNNING, _text),
    # Ended Failed with no result attached: terminated or timed out in Temporal, or a bug in the workflow.
    (WorkflowFailureError, EXIT_FAILED, _cause),
)


# Typer (pinned >= 0.29) vendors click: a bad command line raises its ClickException, a declined
# confirmation its Abort.
_CLICK_ERRORS = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
_CLICK_ABORT = typer.Abort


def render_error(exc: BaseException, document: str | None = None) -> int:
    """Print a known error on stderr (no traceback) and return its exit code; re-raise others: a bug.

    With `document` ("json" or "yaml": the command's -o) the same error is also one object on
    stdout, `{"error": {"message", "exit_code", "type"}}`, so a script reading stdout reads why.
    """
    code, message, usage = _known(exc)
    err_console.print(f"{usage}{message}", markup=False, highlight=False, soft_wrap=True)
    if document is not None:
        from drctl.cli.common import Output, print_json

        print_json(error_document(exc, code, message), Output(document))
    return code


def error_document(exc: BaseException, code: int, message: str) -> dict[str, object]:
    """The error as data: a config's problems each with its field path and line."""
    body: dict[str, object] = {
        "message": message.removeprefix("error: ").removeprefix("Error: "),
        "exit_code": code,
        "type": type(exc).__name__,
    }
    if isinstance(exc, ConfigError):
        body["file"] = safe_text(exc.file)
        body["problems"] = [p.model_dump(exclude_none=True) for p in exc.problems]
    return {"error": body}


def _known(exc: BaseException) -> tuple[int, str, str]:
    """(exit code, the message, a usage hint before it) of a known error; re-raises others: a bug."""
    if isinstance(exc, KeyboardInterrupt):
        return 130, "interrupted", ""
    if isinstance(exc, _CLICK_ABORT):  # a declined confirmation
        return EXIT_FAILED, "aborted", ""
    if isinstance(exc, _CLICK_ERRORS):  # a bad command line: click's usage line, hint and message
        ctx = getattr(exc, "ctx", None)
        usage = f"{ctx.get_usage()}\nTry '{ctx.command_path} -h' for help.\n\n" if ctx is not None else ""
        return int(exc.exit_code), f"Error: {safe_text(exc.format_message())}", usage  # type: ignore[attr-defined]
    for kind, code, message in ERRORS:
        if isinstance(exc, kind):
            return (exc.exit_code if isinstance(exc, UserError) else code), f"error: {message(exc)}", ""
    raise exc
