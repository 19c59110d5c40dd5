"""The one CLI runner: drctl command lines in this process, or as the real binary a user runs."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

# The installed console script, as a user runs it (PYTHONPATH, inherited, picks the tree under test).
DRCTL = Path(sys.executable).parent / "drctl"

# In-process (`run_cli`, `cli`) for suites that run many command lines: a process each would take
# minutes on a loaded machine. As a subprocess (`drctl`, `drctl_async`) where the real binary, its
# exit and its environment are what the test is about.


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `drctl <argv>` in this process: the binary's entry point minus
    os._exit. An unexpected exception propagates: a traceback."""
    from drctl.cli.main import invoke

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = invoke(argv)
    return code, out.getvalue(), err.getvalue()


async def cli(*argv: str) -> tuple[int, str, str]:
    """`run_cli` from an async test, off the event loop that runs the test's in-process workers.

    The command's own asyncio.run needs a thread without a running loop; one command at a time, since
    stdout redirection is process-wide.
    """
    return await asyncio.to_thread(run_cli, list(argv))


def _cli_env(env: dict[str, str] | None) -> dict[str, str]:
    # Wide and plain: rich keeps whole table cells and long paths on one line, with no colour codes.
    return {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}


def drctl(
    *args: str, input_text: str | None = None, timeout_s: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI as a user would; stdin is not a TTY unless input is given through it."""
    return subprocess.run(
        [str(DRCTL), *args],
        capture_output=True,
        text=True,
        input=input_text or "",
        timeout=timeout_s,
        env=_cli_env(env),
    )


async def drctl_async(
    *args: str, timeout_s: float = 240, via: list[str] | None = None
) -> tuple[int, str, str]:
    """`drctl` from an async test, so the in-process workers keep serving meanwhile; `via` is a
    command prefix that runs it (e.g. in a network namespace: tests/support/netns.py)."""
    proc = await asyncio.create_subprocess_exec(
        *(via or []),
        str(DRCTL),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=_cli_env(None),
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    return proc.returncode or 0, out.decode(), err.decode()


def commands() -> dict[tuple[str, ...], object]:
    """Every command of drctl by its path, e.g. ("backup", "schedule", "delete"), built from the
    lazily loaded table: leaves, and groups that act themselves (`upgrade --image`, `drill schedule
    --cron`). Tests walk it so that a new command cannot miss an option every command has."""
    import typer

    from drctl.cli.main import app

    found: dict[tuple[str, ...], object] = {}

    def walk(path: tuple[str, ...], cmd: object) -> None:
        subs = getattr(cmd, "commands", None)
        if path and (not subs or getattr(cmd, "invoke_without_command", False)):
            found[path] = cmd
        for name, sub in (subs or {}).items():
            walk((*path, name), sub)

    walk((), typer.main.get_command(app))
    return found


def options_of(cmd: object) -> dict[str, object]:
    """A command's options by each of their spellings (`--output` and `-o` name one option)."""
    opts: dict[str, object] = {}
    for param in getattr(cmd, "params", []):
        # Typer may vendor click (typer._click), so match by kind rather than by class.
        if getattr(param, "param_type_name", "") == "option":
            for spelling in [*param.opts, *param.secondary_opts]:
                opts[spelling] = param
    return opts
