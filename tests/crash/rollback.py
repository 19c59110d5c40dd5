"""The drill kill point mid-rollback: find the worker's `chaos run`, and see when it plays its rollbacks.

`chaos run` runs in a session of its own (the activity starts it with start_new_session), so the
worker's process group does not hold it: a pod's death takes both, so both are killed here. It is
"rolling back" once its log says chaoslib's "Let's rollback..." and the region still holds the fault:
the rollback is paused before its clear (the scenario's experiment pauses it), so the kill lands there.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from drctl.config.schema import FleetConfig
from tests.crash.endstate import faults_left

ROLLBACK_PAUSE_S = 20.0  # 20 s pause + 20 s clear fits the 50 s rollback budget (drctl/chaos/budget.py)


def chaos_of(worker_pid: int) -> list[int]:
    """The `chaos run` processes the worker started."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat, argv = (entry / "stat").read_text(), (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        # Field 4 (after the parenthesised command, which may hold spaces) is the parent pid.
        if int(stat.rsplit(")", 1)[1].split()[1]) == worker_pid and b"chaostoolkit" in argv:
            found.append(int(entry.name))
    return found


def _log_of(pid: int) -> Path | None:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag == b"--log-file":
            return Path(value.decode())
    return None


def rolling_back(worker_pid: int, cfg: FleetConfig) -> bool:
    """The worker's `chaos run` has started its rollbacks, and the fault is still in place."""
    for pid in chaos_of(worker_pid):
        log = _log_of(pid)
        with contextlib.suppress(OSError):
            if log is not None and "Let's rollback" in log.read_text(errors="replace"):
                return bool(faults_left(cfg))
    return False


def kill_chaos(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
