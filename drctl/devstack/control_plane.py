"""The dev stack's control plane as a fault target: stop the Temporal dev server or a region's worker, and
bring them back.

A region that dies may take drctl's own control plane with it: the Temporal cluster it hosts and
the worker that polls its queue. The region admin API (POST /faults/control-plane) stops the stack's
recorded process as a crash would (SIGTERM, then SIGKILL after 2 s), and /faults/clear starts it again the
way an operator or Kubernetes would (restart.py: the same argv, Temporal on the same db file, so
running workflows survive), waiting until it serves. Only processes `drctl dev up` recorded are
touched; a stack started without workers has no worker to stop, and nothing is hurt.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

from drctl.config.schema import FleetConfig
from drctl.devstack import processes, restart
from drctl.devstack.stack import _pid_path, _read_record, state_dir

Component = Literal["temporal", "worker"]
# Temporal first on the way back: a worker is ready only once it polls.
_ORDER = {"temporal": 0, "worker": 1}
KILL_AFTER_S = 2.0


class ControlPlane:
    """What one region's admin API may stop: the stack's Temporal server and the region's own worker."""

    def __init__(self, cfg: FleetConfig, config_path: Path, region: str) -> None:
        self.cfg, self.config_path, self.region = cfg, config_path, region
        self.stopped: list[Component] = []

    def _name(self, component: Component) -> str:
        return "temporal" if component == "temporal" else f"worker-{self.region}"

    def _pid(self, component: Component) -> int | None:
        """The live pid of the recorded process, running the recorded command (never a recycled pid)."""
        s = state_dir(self.cfg)
        name = self._name(component)
        argv = (_read_record(s).get("components", {}).get(name) or {}).get("argv")
        pid = processes.read_pid(_pid_path(s, name))
        return pid if pid is not None and argv and processes.is_ours(pid, argv) else None

    async def stop(self, component: Component) -> list[str]:
        """Stop it and keep it down until `restore`; the names of what was stopped ([] if not running)."""
        pid = self._pid(component)
        if pid is None:
            return []
        # A region that dies does not wait for a graceful shutdown: SIGKILL if SIGTERM has not ended it
        # within KILL_AFTER_S (a worker drains its activities for worker.graceful_shutdown_s otherwise).
        await asyncio.to_thread(processes.terminate, [pid], KILL_AFTER_S)
        if component not in self.stopped:
            self.stopped.append(component)
        return [f"{self._name(component)} (pid {pid})"]

    async def restore(self, timeout_s: float = 60.0) -> list[str]:
        """Start every stopped component again, Temporal first, each waited until it serves."""
        started: list[str] = []
        for component in sorted(self.stopped, key=_ORDER.__getitem__):
            if self._pid(component) is None:
                if component == "temporal":
                    await asyncio.to_thread(restart.restart_temporal, self.cfg, self.config_path, timeout_s)
                else:
                    await asyncio.to_thread(
                        restart.start_worker, self.cfg, self.config_path, self.region, timeout_s
                    )
            started.append(self._name(component))
            self.stopped.remove(component)
        return started
