"""drctl command line. Thin: parse, start/signal/query a workflow, render."""

from __future__ import annotations

import os
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated

import typer

from drctl.cli import (
    backup,
    codec,
    config_cmd,
    dev,
    drill,
    failover,
    migrate,
    monitor,
    notify,
    ops,
    replicate,
    status,
    upgrade,
    worker,
)
from drctl.cli.common import console
from drctl.cli.errors import render_error

app = typer.Typer(
    name="drctl",
    help="Disaster recovery and migration for multi-region LLM inference fleets, on Temporal.",
    epilog="Exit codes, the same for every command: 0 succeeded; 1 ran and did not succeed (the result says "
    "why); 2 usage or validation error; 3 nothing started: the fleet is busy, or Temporal is unreachable.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

# Every command module holds one module-level Typer app: a named group (`ops`, `drill`, …) or the
# top-level commands it defines (`failover`, `failback`, `status`, …).
for _module in (
    config_cmd,
    dev,
    worker,
    status,
    failover,
    monitor,
    ops,
    upgrade,
    migrate,
    backup,
    drill,
    replicate,
    notify,
    codec,
):
    app.add_typer(_module.app)


def package_version() -> str:
    try:
        return version("drctl")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def _print_version(value: bool) -> None:
    if value:
        console.print(f"drctl {package_version()}", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version_: Annotated[
        bool | None,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print drctl's version and exit."
        ),
    ] = None,
) -> None:
    """Disaster recovery and migration for multi-region LLM inference fleets, on Temporal."""


def invoke(args: list[str] | None = None) -> int:
    """Run one command line and return its exit code; every error is rendered here, never raised."""
    try:
        # Without standalone mode click returns typer.Exit's code instead of raising it.
        returned = app(args=args, prog_name="drctl", standalone_mode=False)
        return returned if isinstance(returned, int) else 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - the one place errors are rendered
        return render_error(exc)


def run() -> None:
    code = invoke()
    sys.stdout.flush()
    sys.stderr.flush()
    # The Temporal SDK's runtime can abort at interpreter exit (sdk-python#300); the work is done
    # and flushed, so leave without running interpreter teardown.
    os._exit(code)


if __name__ == "__main__":
    run()
