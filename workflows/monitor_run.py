"""What FleetMonitor's collaborators share: the persisted MonitorState and one run's bookkeeping.

`workflows.monitor.FleetMonitor` builds one `MonitorRun` and hands it to `MonitorActions`,
`MonitorQuorum` and `MonitorWatch`, as `workflows.upgrade.Upgrade` hands `WaveSteps` its state:
each piece reads and writes only what it is given. Only `state` crosses continue-as-new.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from drctl.models.fleet_spec import FleetSpec
    from drctl.models.monitor import FailoverRecord, MonitorState


@dataclass
class MonitorRun:
    state: MonitorState
    # The running Failover, Failback or vote-then-failover task: one at a time.
    child: asyncio.Task[None] | None = None
    # The failover the running child started, shown by the `status` query.
    active: FailoverRecord | None = None
    # Set to wake the loop's wait at once (a signal, an update, a finished child).
    poke: bool = False
    # A config sent by `update_spec`, applied between rounds.
    pending_spec: FleetSpec | None = None

    def child_done(self) -> None:
        """The child task ended: the next decision may start another, and should not wait a round."""
        self.child = None
        self.poke = True
