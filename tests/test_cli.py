"""Usage mistakes get click's usage message and exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["nosuch"], "No such command 'nosuch'"),
        (["failover"], "Missing option '--to'"),
        (["drill", "run", "experiments/region-outage.json", "--yes"], "No such option: --yes"),
        (["upgrade", "--image"], "requires an argument"),
        (["status", "--output", "yaml"], "'yaml' is not one of"),
    ],
)
def test_usage_errors_exit_2_without_traceback(args: list[str], words: str) -> None:
    done = subprocess.run([sys.executable, "-m", "drctl", *args], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert words in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
