"""drctl command line. Thin: parse, start/signal/query a workflow, render."""

from __future__ import annotations

import importlib
import os
import sys

import typer

from drctl.cli.common import err_console, render_error

app = typer.Typer(
    name="drctl",
    help="Disaster recovery and migration for multi-region LLM inference fleets, on Temporal.",
    epilog="Exit codes, the same for every command: 0 succeeded; 1 ran and did not succeed (the result says "
           "why); 2 usage or validation error; 3 nothing started: the fleet is busy, or Temporal is unreachable.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# Each module registers its commands on `app`; a module missing from the tree is skipped so the
# CLI keeps working while a command group is under construction on a branch.
_COMMAND_MODULES = [
    "drctl.cli.config_cmd",
    "drctl.cli.dev",
    "drctl.cli.worker",
    "drctl.cli.status",
    "drctl.cli.failover",
    "drctl.cli.ops",
    "drctl.cli.upgrade",
    "drctl.cli.backup",
    "drctl.cli.drill",
    "drctl.cli.replicate",
    "drctl.cli.notify",
    "drctl.cli.codec",
]

for _name in _COMMAND_MODULES:
    try:
        _mod = importlib.import_module(_name)
    except ModuleNotFoundError as _exc:
        if _exc.name != _name:
            raise
        continue
    _mod.register(app)


def _click_classes(name: str) -> tuple[type[BaseException], ...]:
    """Typer 0.29 vendors click as typer._click; older typers use click itself. Match both."""
    import click

    vendored = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    found = [getattr(click.exceptions, name)]
    for module in (importlib.import_module(vendored.__module__), typer):
        if hasattr(module, name):
            found.append(getattr(module, name))
    return tuple(found)


_CLICK_ERRORS = _click_classes("ClickException")
_CLICK_ABORT = _click_classes("Abort")


def invoke(args: list[str] | None = None) -> int:
    """Run one command line and return its exit code; every error is rendered here, never raised."""
    code = 0
    try:
        # Without standalone mode click returns typer.Exit's code instead of raising it.
        returned = app(args=args, standalone_mode=False)
        if isinstance(returned, int):
            code = returned
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        code = 130
    except Exception as exc:  # noqa: BLE001 - the one place errors are rendered
        if isinstance(exc, _CLICK_ABORT):
            err_console.print("aborted")
            code = 1
        elif isinstance(exc, _CLICK_ERRORS):
            exc.show()  # type: ignore[attr-defined]  # usage line and what was wrong
            code = exc.exit_code  # type: ignore[attr-defined]  # 2 for usage errors
        else:
            code = render_error(exc)
    return code


def run() -> None:
    code = invoke()
    sys.stdout.flush()
    sys.stderr.flush()
    # The Temporal SDK's runtime can abort at interpreter exit (sdk-python#300); the work is done
    # and flushed, so leave without running interpreter teardown.
    os._exit(code)


if __name__ == "__main__":
    run()
