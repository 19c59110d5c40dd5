"""Usage mistakes get click's usage message and exit 2, never a traceback."""

from __future__ import annotations

import os
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


def test_help_states_the_exit_codes() -> None:
    done = subprocess.run([sys.executable, "-m", "drctl", "--help"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env={**os.environ, "COLUMNS": "300"})
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "0 succeeded; 1 ran and did not succeed" in text and "3 nothing started: the fleet is busy" in text
