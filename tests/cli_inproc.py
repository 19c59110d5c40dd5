"""Run drctl command lines in the test process: the same entry point as the binary, minus os._exit.

Hostile-input and property-based suites run hundreds of command lines; a process each would take
minutes on a loaded machine. One subprocess per suite still checks the real binary.
"""

from __future__ import annotations

import contextlib
import io

from drctl.cli.main import invoke


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `drctl <argv>`. An unexpected exception propagates: a traceback."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = invoke(argv)
    return code, out.getvalue(), err.getvalue()
