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
from drctl.client.operations import FleetBusyError
from drctl.config.schema import ConfigError, UnknownRegionError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_STARTED, EXIT_STILL_RUNNING = 0, 1, 2, 3, 4


class StillRunning(Exception):
    """`--timeout` passed while waiting for an operation: the wait ends, the operation goes on."""

    def __init__(self, workflow_id: str, link: str, waited_s: float, follow: str = "watch") -> None:
        where = f"`drctl ops {follow} {workflow_id}`" + (f" or {link}" if link else "")
        super().__init__(f"{workflow_id} is still running after {waited_s:g} s; follow it with {where}")
        self.workflow_id = workflow_id


def _text(exc: BaseException) -> str:
    return str(exc)


def _config(exc: BaseException) -> str:
    """One line for one problem (what a command that only loads the config needs); the list for more."""
    assert isinstance(exc, ConfigError)
    if len(exc.problems) == 1:
        p = exc.problems[0]
        return f"invalid config {exc.file}: {f'line {p.line}: ' if p.line else ''}{p.path}: {p.message}"
    return f"invalid config {exc}"


def _cause(exc: BaseException) -> str:
    return f"the operation ended without a result: {getattr(exc, 'cause', None) or exc}"


# First match wins (subclasses before their bases). A UserError carries its own exit code.
ERRORS: tuple[tuple[type[BaseException], int, Callable[[BaseException], str]], ...] = (
    (UserError, EXIT_USAGE, _text),
    (TemporalConfigError, EXIT_USAGE, _text),
    (ConfigError, EXIT_USAGE, _config),
    (UnknownRegionError, EXIT_USAGE, _text),
    (ExperimentInvalid, EXIT_USAGE, lambda exc: f"invalid experiment {exc}"),
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


def render_error(exc: BaseException) -> int:
    """Print a known error on stderr (no traceback) and return its exit code; re-raise others: a bug."""
    if isinstance(exc, KeyboardInterrupt):
        err_console.print("interrupted")
        return 130
    if isinstance(exc, _CLICK_ABORT):  # a declined confirmation
        err_console.print("aborted")
        return EXIT_FAILED
    if isinstance(exc, _CLICK_ERRORS):
        exc.show()  # type: ignore[attr-defined]  # usage line and what was wrong
        return int(exc.exit_code)  # type: ignore[attr-defined]  # 2 for usage errors
    for kind, code, message in ERRORS:
        if isinstance(exc, kind):
            err_console.print(f"error: {message(exc)}", markup=False, highlight=False, soft_wrap=True)
            return exc.exit_code if isinstance(exc, UserError) else code
    raise exc
