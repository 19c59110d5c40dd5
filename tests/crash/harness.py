"""The kill-point harness: real per-region `drctl worker` processes, SIGKILLed while they hold an activity.

One generic procedure serves every kill point (see `run_kill_point`):
1. start the operation;
2. wait, by describing the workflow through the Temporal client, until the named activity has
   STARTED on a worker (Temporal writes ActivityTaskStarted to history only when the attempt ends,
   so the pending-activity list is the only place a running attempt shows);
3. SIGKILL the worker process whose identity (`pid@host`) holds it, and prove the attempt was
   still in flight at the kill;
4. start a replacement worker for that region (drctl.devstack.restart.start_worker);
5. wait for the result and hand it to the scenario's end-state check.

Activities that finish in a millisecond (set a weight) are caught by stalling the process they talk
to with SIGSTOP just before they start, the way a hung HAProxy or API server would: the attempt
blocks on its socket timeout, the worker dies holding it, and the process is resumed right after.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from drctl.config.schema import FleetConfig
from drctl.devstack import processes, restart
from drctl.devstack.stack import StackError, state_dir
from tests.crash import rollback
from tests.crash.endstate import EndState, faults_left
from tests.crash.lockstall import Stranded, strand_lock
from tests.support.wait import wait_until


@dataclass(frozen=True)
class KillPoint:
    """One row of the kill-point table: kill the worker holding `activity` in `phase` of `op`."""

    op: str
    phase: str
    activity: str
    # A process to SIGSTOP so a fast activity is caught in flight: "global" (the global HAProxy),
    # "gateway:<region>" (a region gateway), "kube:<region>" (a region's API server process);
    # or "lock:<operation>": the fleet lock, left held by a crashed run of <operation> and its
    # worker killed (tests/crash/lockstall.py), so the next acquire waits.
    stall: str | None = None
    # Stall once this activity has started (it runs just before the target and does not need the
    # stalled process); None: stall right after the operation starts.
    stall_after: str | None = None
    stall_after_nth: int = 1
    # Stall only once `stall_after` has heartbeated: its reads of the stalled process are done
    # (an analysis lists the replicas from the API server, then only sends them requests).
    stall_after_beat: bool = False
    # A process that holds the run just before the target while `stall` is put in place: SIGSTOPped
    # once `stall_after` is scheduled, it keeps `gate_activity` #`gate_nth` hanging until `stall`
    # is stopped too, then resumes it. For a target that follows a fast activity at once (the track
    # weights back to stable, then the canary's removal), where stalling on a glimpse of the fast
    # one in the history races it.
    gate: str | None = None
    gate_activity: str | None = None
    gate_nth: int = 1
    # Kill at the n-th start of the activity (a weight step that is not the first).
    nth: int = 1
    # After the activity started, also wait for this before the kill: "fault injected" (the
    # region's admin API holds a fault), so a drill dies with its fault in place; "rollback running"
    # (its `chaos run` has begun the rollbacks, the fault still held), so it dies mid-rollback.
    kill_when: str | None = None
    # Input overrides the scenario applies (short bake times, more verify requests, ...).
    tweak: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.op}-{self.phase}".replace(" ", "_")


@dataclass
class Scenario:
    """How to run one operation: set the fleet up, start it, and judge what it left behind."""

    start: Callable[[Client, FleetConfig, KillPoint], Awaitable[WorkflowHandle[Any, Any]]]
    result_type: type
    expect: Callable[[FleetConfig], EndState]
    prepare: Callable[[FleetConfig], None] = lambda _cfg: None
    # Run once the worker is killed: removes the fault the scenario injected to reach the phase
    # (it has done its work), so the end state can require that no fault is left.
    after_kill: Callable[[FleetConfig], None] = lambda _cfg: None
    timeout_s: float = 120.0


class RegionWorkers:
    """One `drctl worker --region R` process per region (as the dev stack runs them), for one config."""

    def __init__(self, cfg: FleetConfig, path: Path) -> None:
        self.cfg, self.path = cfg, path
        self.pids: dict[str, int] = {}
        self.started: list[int] = []  # every pid ever started, so `stop` leaves no stray worker

    async def ensure(self) -> None:
        """Every region has a live worker (a killed one was replaced by its test, or is replaced now)."""
        for r in self.cfg.region_names:
            if r not in self.pids or not processes.pid_alive(self.pids[r]):
                await self.start(r)

    async def start(self, region: str) -> int:
        """Start the region's worker, first stopping any worker of ours for it that we no longer track.

        A start that failed after its spawn (a replacement not ready in time, or one whose test
        failed while it was starting) leaves a live worker that holds the region's HTTP port, and
        every later start would fail on it: one flaky kill point must not fail all that follow.
        """
        await asyncio.to_thread(self._stop_strays, region)
        try:
            self.pids[region] = await asyncio.to_thread(restart.start_worker, self.cfg, self.path, region)
        except BaseException:
            await asyncio.to_thread(self._stop_strays, region)
            raise
        self.started.append(self.pids[region])
        return self.pids[region]

    def _stop_strays(self, region: str) -> None:
        tracked = self.pids.get(region)
        strays = [
            pid
            for pid in processes.pids_mentioning(str(self.path.resolve()))
            if pid != tracked and self._is_worker_for(pid, region)
        ]
        processes.terminate(strays, timeout_s=5.0)

    @staticmethod
    def _is_worker_for(pid: int, region: str) -> bool:
        argv = processes.cmdline(pid)
        return "worker" in argv and any(
            a == "--region" and b == region for a, b in zip(argv, argv[1:], strict=False)
        )

    def region_of(self, identity: str) -> str:
        pid = int(identity.split("@", 1)[0])
        found = [r for r, p in self.pids.items() if p == pid]
        assert found, f"activity held by {identity!r}, none of our workers {self.pids}"
        return found[0]

    def kill(self, region: str) -> None:
        """SIGKILL the region's worker (kill_pid)."""
        self.kill_pid(self.pids[region])

    def kill_pid(self, pid: int) -> None:
        """SIGKILL a worker's process group, as a pod's death takes the worker and its children
        (a `chaos run` it started) at once. Workers are session leaders, so pgid == pid."""
        os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while processes.pid_alive(pid):  # pid_alive reaps the zombie
            assert time.monotonic() < deadline, f"worker {pid} survived SIGKILL"
            time.sleep(0.02)

    def stop(self) -> None:
        processes.terminate(p for p in self.started if processes.pid_alive(p))


def _stall_pid(cfg: FleetConfig, what: str) -> int:
    s = state_dir(cfg)
    kind, _, region = what.partition(":")
    if kind == "global":
        pid = processes.read_pid(s / "pids" / "haproxy-global.pid")
    elif kind == "gateway":
        pid = json.loads((s / f"replicas-{region}.json").read_text()).get("gateway_pid")
    elif kind == "kube":
        pid = processes.read_pid(s / "pids" / f"region-{region}.pid")
    else:
        raise ValueError(f"unknown stall target {what!r}")
    assert isinstance(pid, int) and processes.pid_alive(pid), f"no live process for {what}"
    return pid


@contextlib.contextmanager
def stalled(cfg: FleetConfig, what: str | None) -> Iterator[None]:
    """SIGSTOP the named stack process for the block; it is always resumed."""
    if what is None or what.startswith("lock:"):  # the lock is stalled before the start
        yield
        return
    pid = _stall_pid(cfg, what)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


async def pending(handle: WorkflowHandle[Any, Any], activity: str) -> list[PendingActivityInfo]:
    desc = await handle.describe()
    return [a for a in desc.raw_description.pending_activities if a.activity_type.name == activity]


async def scheduled_ids(handle: WorkflowHandle[Any, Any], activity: str) -> list[str]:
    """Activity ids of every scheduled run of `activity`, in order (the history has these at once)."""
    history = await handle.fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.activity_id
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity
    ]


async def wait_scheduled(
    handle: WorkflowHandle[Any, Any], activity: str, nth: int = 1, timeout_s: float = 60.0
) -> str:
    """The activity id of the n-th scheduled run of `activity` (bounded; polls every 50 ms)."""
    deadline = time.monotonic() + timeout_s
    ids: list[str] = []
    while time.monotonic() < deadline:
        try:
            ids = await scheduled_ids(handle, activity)
        except RPCError as exc:  # not started yet (the monitor starts it when it decides)
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            await asyncio.sleep(0.05)
            continue
        if len(ids) >= nth:
            return ids[nth - 1]
        desc = await handle.describe()
        assert desc.status is None or desc.status.name == "RUNNING", (
            f"{handle.id} ended ({desc.status.name if desc.status else '?'}) before {activity} #{nth} was scheduled"
        )
        await asyncio.sleep(0.05)
    raise AssertionError(
        f"{activity} #{nth} of {handle.id} not scheduled within {timeout_s:g}s ({len(ids)} seen)"
    )


async def _wait_pending(
    handle: WorkflowHandle[Any, Any],
    activity: str,
    nth: int,
    timeout_s: float,
    done: Callable[[PendingActivityInfo], bool],
    until: str,
    gone: str,
) -> PendingActivityInfo:
    """The n-th run of `activity` once `done` holds for it (bounded; polls every 50 ms)."""
    wanted = await wait_scheduled(handle, activity, nth, timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        mine = [a for a in await pending(handle, activity) if a.activity_id == wanted]
        assert mine, f"{activity} #{nth} ended before {gone}"
        if done(mine[0]):
            return mine[0]
        await asyncio.sleep(0.05)
    raise AssertionError(f"{activity} #{nth} of {handle.id} {until} within {timeout_s:g}s")


async def wait_started(
    handle: WorkflowHandle[Any, Any], activity: str, nth: int = 1, timeout_s: float = 60.0
) -> PendingActivityInfo:
    """The n-th run of `activity` once a worker has started it; fails if it ended before it was seen."""
    return await _wait_pending(
        handle,
        activity,
        nth,
        timeout_s,
        lambda a: a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
        until="not started by a worker",
        gone="it was seen running: stall its dependency (KillPoint.stall)",
    )


async def wait_heartbeat(
    handle: WorkflowHandle[Any, Any], activity: str, nth: int = 1, timeout_s: float = 60.0
) -> None:
    """Until the n-th run of `activity` has recorded a heartbeat (bounded; polls every 50 ms)."""
    await _wait_pending(
        handle,
        activity,
        nth,
        timeout_s,
        lambda a: bool(a.heartbeat_details.payloads),
        until="did not heartbeat",
        gone="it heartbeated",
    )


async def run_kill_point(
    client: Client, cfg: FleetConfig, workers: RegionWorkers, scenario: Scenario, kp: KillPoint
) -> Any:
    """Start, kill the holder of kp.activity in flight, replace it, and return the operation's result."""
    from drctl.client.outcome import result_of

    for attempt in range(1, LOCK_ATTEMPTS + 1):
        await workers.ensure()
        await asyncio.to_thread(scenario.prepare, cfg)
        stranded = None
        if kp.stall and kp.stall.startswith("lock:"):
            stranded = await strand_lock(client, cfg, workers, kp.stall.split(":", 1)[1])
        try:
            return await _kill_and_wait(client, cfg, workers, scenario, kp, stranded)
        except MissedLockStall as missed:
            # The precondition, not the behaviour under test: Temporal handed the lock's task to a
            # live worker before the acquire was seen in flight, so nothing was killed. The run
            # ends as a clean one; then the kill point is tried again.
            if attempt == LOCK_ATTEMPTS:
                raise AssertionError(f"{missed} ({attempt} attempts)") from None
            with contextlib.suppress(Exception):  # its outcome is not what this test judges
                await asyncio.wait_for(result_of(missed.handle, scenario.result_type), scenario.timeout_s)
        finally:
            # A failure while the lock's worker was being replaced must not leave that start running
            # into the next test (it would race the next test's own start for the region's port).
            if stranded is not None and not stranded.restarting.done():
                with contextlib.suppress(Exception):
                    await stranded.restarting
    raise AssertionError("unreachable")


# A lock stall depends on Temporal's sticky-queue timing (tests/crash/lockstall.py): tried this often.
LOCK_ATTEMPTS = 3


class MissedLockStall(AssertionError):
    """The operation's `acquire_fleet` ended before it was seen in flight behind a stranded lock."""

    def __init__(self, message: str, handle: WorkflowHandle[Any, Any]) -> None:
        super().__init__(message)
        self.handle = handle


async def _kill_and_wait(
    client: Client,
    cfg: FleetConfig,
    workers: RegionWorkers,
    scenario: Scenario,
    kp: KillPoint,
    stranded: Stranded | None,
) -> Any:
    from drctl.client.outcome import result_of

    handle = await scenario.start(client, cfg, kp)
    if kp.stall and kp.stall_after:
        await wait_scheduled(handle, kp.stall_after, kp.stall_after_nth)
        if kp.stall_after_beat:
            await wait_heartbeat(handle, kp.stall_after, kp.stall_after_nth)
    with contextlib.ExitStack() as stall:
        if kp.gate and kp.gate_activity:
            with stalled(cfg, kp.gate):
                await wait_started(handle, kp.gate_activity, kp.gate_nth)  # hangs on the gate
                stall.enter_context(stalled(cfg, kp.stall))
        else:
            stall.enter_context(stalled(cfg, kp.stall))
        try:
            held = await wait_started(handle, kp.activity, kp.nth)
        except AssertionError as exc:
            if stranded is not None and "ended before" in str(exc):
                raise MissedLockStall(str(exc), handle) from None
            raise
        holder = int(held.last_worker_identity.split("@")[0])
        chaos: list[int] = []
        if kp.kill_when == "fault injected":
            await asyncio.to_thread(wait_until, lambda: faults_left(cfg), 60, 0.1, "the fault injected")
        elif kp.kill_when == "rollback running":
            what = "the rollbacks playing with the fault still held"
            await asyncio.to_thread(wait_until, lambda: rollback.rolling_back(holder, cfg), 180, 0.1, what)
            chaos = rollback.chaos_of(holder)  # its own session: the worker's group does not hold it
        if stranded is not None and holder not in workers.pids.values():
            # Held by the replacement of the lock's worker, still starting up. Kill it now: waiting
            # for its readiness can outlast the sticky-queue window that holds the lock's answer.
            region = stranded.region
            workers.kill_pid(holder)
            with contextlib.suppress(StackError):  # it died before its /readyz answered
                await stranded.restarting
        else:
            region = workers.region_of(held.last_worker_identity)
            workers.kill(region)
            rollback.kill_chaos(chaos)
    # Still pending with the same attempt: the kill hit the attempt in flight, not after it ended.
    after = {(a.activity_id, a.attempt) for a in await pending(handle, kp.activity)}
    assert (held.activity_id, held.attempt) in after, f"{kp.activity} finished before its worker was killed"
    await asyncio.to_thread(scenario.after_kill, cfg)
    if stranded is not None and not stranded.restarting.done():
        await stranded.restarting
    await workers.start(region)
    return await asyncio.wait_for(result_of(handle, scenario.result_type), scenario.timeout_s)
