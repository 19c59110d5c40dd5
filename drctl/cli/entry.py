"""The `drctl` executable: answers `--version` before anything heavy loads, then runs the CLI."""

from __future__ import annotations

import sys


def package_version() -> str:
    # importlib.metadata (and the zipfile, csv and email modules it loads) only when asked.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("drctl")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def run() -> None:
    # The commonest probe of an install, and what every wrapper script asks first: answered without
    # importing typer, rich or any client library.
    if sys.argv[1:] == ["--version"]:
        print(f"drctl {package_version()}")
        sys.exit(0)
    from drctl.cli.main import run as run_cli

    run_cli()
