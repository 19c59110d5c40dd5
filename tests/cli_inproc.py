"""Run drctl command lines in the test process: the same entry point as the binary, minus os._exit.

Hostile-input and property-based suites run hundreds of command lines; a process each would take
minutes on a loaded machine. One subprocess per suite still checks the real binary.
"""

from __future__ import annotations

import asyncio
import contextlib
import io

from drctl.cli.main import invoke


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `drctl <argv>`. An unexpected exception propagates: a traceback."""
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
