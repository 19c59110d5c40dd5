"""What FleetMonitor's collaborators share: the persisted MonitorState and one run's bookkeeping.

`workflows.monitor.FleetMonitor` builds one `MonitorRun` and hands it to `MonitorActions`,
`MonitorQuorum` and `MonitorWatch`, as `workflows.upgrade.Upgrade` hands `WaveSteps` its state:
each piece reads and writes only what it is given. Only `state` crosses continue-as-new.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from drctl.models.failover import FailoverVerified
    from drctl.models.fleet_spec import FleetSpec
    from drctl.models.monitor import FailoverRecord, MonitorState


@dataclass
class MonitorRun:
    state: MonitorState
    # The running Failover, Failback or vote-then-failover task: one at a time, except that a failover
    # may start while a failback runs (it preempts the failback: docs/lock.md).
    child: asyncio.Task[None] | None = None
    child_kind: str | None = None
    # A failover verified on its target that still watches its objective: done for the fleet (the
    # next decision does not wait for it), awaited only before continue-as-new.
    watching: asyncio.Task[None] | None = None
    # `failover_verified` signals from the monitor's failovers, by run id.
    verified: dict[str, FailoverVerified] = field(default_factory=dict)
    # The failover the running child started, shown by the `status` query.
    active: FailoverRecord | None = None
    # Set to wake the loop's wait at once (a signal, an update, a finished child).
    poke: bool = False
    # A config sent by `update_spec`, applied between rounds.
    pending_spec: FleetSpec | None = None

    def start_child(self, kind: str, task: asyncio.Task[None]) -> None:
        self.child, self.child_kind = task, kind

    def child_done(self) -> None:
        """The calling child task is done for the fleet: the next decision may start another, and
        should not wait a round. A task that is no longer `child` (a failback a failover preempted)
        clears nothing."""
        try:
            me = asyncio.current_task()
        except RuntimeError:
            return  # the run is being evicted from the worker's cache (its tasks closed): state goes too
        if self.child is None or (me is not None and self.child is not me):
            return
        self.child, self.child_kind = None, None
        self.poke = True
