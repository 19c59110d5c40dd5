"""Drill activities: run a Chaos Toolkit experiment under load, and watch the operations it causes.

`run_experiment` runs `chaos run --journal-path` as a subprocess because chaoslib's
`run_experiment` installs signal handlers and so only works on a main thread. It heartbeats while
the subprocess runs; when the activity is cancelled it sends SIGTERM, which chaoslib turns into an
interruption that still plays the rollbacks (strategy `always`), waits for them, and then returns
the interrupted run's outcome (`cancelled=True`) rather than raising: the drill's report needs the
journal to say whether the rollbacks really ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from temporalio import activity
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from activities.defined import activity_methods
from activities.reports import ReportStore
from drctl.chaos.boundary import digest
from drctl.chaos.budget import ROLLBACK_GRACE_S
from drctl.chaos.journal import judge
from drctl.chaos.runenv import chaos_env
from drctl.chaos.validate import EXPERIMENT_LIMITS, ExperimentInvalid, validate_experiment
from drctl.client.operations import FleetBusyError, describe_or_none, start_operation
from drctl.config.safeload import DocumentError, load_json
from drctl.config.schema import FleetConfig
from drctl.models.drill import (
    ExperimentOutcome,
    ExperimentRunInput,
    JournalVerdict,
    LoadSample,
    MonitorCheck,
    MonitorCheckInput,
    Observation,
    ObserveInput,
)
from drctl.models.outcome import details_from
from drctl.providers import completions, executables
from drctl.providers.auth import AuthConfigError, auth_headers

_HEARTBEAT_S = 2.0
_MAX_SAMPLES = 20_000


def _now() -> datetime:
    return datetime.now(UTC)


async def _load(
    cfg: FleetConfig,
    rps: float,
    deadline: float,
    samples: list[LoadSample],
    headers: dict[str, str],
    timeout_s: float,
) -> None:
    """Open-loop load: one 1-token completion every 1/rps seconds until cancelled or the deadline.

    The serving region comes from the header the regional gateways set (traffic.region_header).
    """
    url, header = completions.url_of(cfg.traffic.global_endpoint), cfg.traffic.region_header
    limits = completions.fresh_connections(64)
    inflight: set[asyncio.Task[None]] = set()

    async def one(client: httpx.AsyncClient) -> None:
        t0 = _now()
        answer = await completions.complete(client, url, cfg.workload.model, "drill load", header)
        samples.append(LoadSample(t=t0, ok=answer.ok, region=answer.region, latency_ms=answer.latency_ms))

    async with httpx.AsyncClient(timeout=timeout_s, limits=limits, headers=headers) as client:
        try:
            while time.monotonic() < deadline and len(samples) + len(inflight) < _MAX_SAMPLES:
                if len(inflight) < 64:  # a hung endpoint must not grow the task set without bound
                    task = asyncio.create_task(one(client))
                    inflight.add(task)
                    task.add_done_callback(inflight.discard)
                await asyncio.sleep(1.0 / rps)
        finally:
            # Requests already sent finish (bounded by timeout_s) so the tail of the window is seen.
            if inflight:
                await asyncio.wait(set(inflight), timeout=timeout_s + 1)


def _read_run(journal_path: Path, log: Path) -> tuple[dict[str, Any], str]:
    """The journal (empty if chaos wrote none or a partial one) and the tail of chaos's log."""
    journal: dict[str, Any] = {}
    if journal_path.exists():
        with contextlib.suppress(ValueError):
            journal = json.loads(journal_path.read_text())
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:]) if log.exists() else ""
    return journal, tail


class ChaosActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg

    def _prepare(self, inp: ExperimentRunInput) -> tuple[Path, Path, str]:
        """Write, check and return the experiment this worker will run, in a fresh private temp dir.

        Nothing from the workflow input names a path: the files have fixed names. The text is
        validated against this worker's config (it is the one that injects), with this worker's
        fleet config, endpoint and the drill id filled in; the canonical text that comes out is
        validated once more from the file that will run, and must come out byte for byte the same.
        """
        if digest(inp.plan.text) != inp.plan.sha256:
            raise ExperimentInvalid(
                "experiment", "the plan's text does not match its sha256: refusing to run it"
            )
        try:
            # Bounded like a file: workflow input is not trusted (depth, size, duplicate keys).
            doc = load_json(inp.plan.text, EXPERIMENT_LIMITS)
        except DocumentError as exc:
            raise ExperimentInvalid("experiment", f"the plan's text is not canonical JSON: {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("configuration"), dict):
            raise ExperimentInvalid("experiment", "the plan's text has no configuration")
        doc["configuration"]["drill_id"] = inp.workflow_id
        workdir = Path(tempfile.mkdtemp(prefix="drctl-drill-"))  # mode 0700: only this worker writes here
        try:
            (workdir / "submitted.json").write_text(json.dumps(doc))
            text = validate_experiment(workdir / "submitted.json", self.cfg, inp.plan.target_region).text
            run = workdir / "experiment.json"
            run.write_text(text)
            checked = validate_experiment(run, self.cfg, inp.plan.target_region)
            if checked.text != text:
                raise ExperimentInvalid("experiment", "the canonical experiment changed when validated again")
            # chaos reads ~/.chaostoolkit/settings.yaml, which can load controls: give it an empty one.
            (workdir / "settings.yaml").write_text("{}\n")
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        return workdir, run, checked.sha256

    @activity.defn(name="drill_run_experiment")
    async def run_experiment(self, inp: ExperimentRunInput) -> ExperimentOutcome:
        """Run the experiment under load and judge its journal."""
        try:
            workdir, exp_path, sha = await asyncio.to_thread(self._prepare, inp)
        except ExperimentInvalid as exc:
            raise ApplicationError(str(exc), type="ExperimentInvalid", non_retryable=True) from None
        try:
            headers = auth_headers(self.cfg)
        except AuthConfigError as exc:
            shutil.rmtree(workdir, ignore_errors=True)
            raise ApplicationError(str(exc), type="AuthConfigError", non_retryable=True) from None
        journal_path = workdir / "journal.json"
        samples: list[LoadSample] = []
        started_at = _now()
        deadline = time.monotonic() + inp.timeout_s
        load = asyncio.create_task(
            _load(self.cfg, inp.load_rps, deadline, samples, headers, self.cfg.health.probe_timeout_s)
        )
        cancelled = False
        proc: asyncio.subprocess.Process | None = None
        try:
            await asyncio.sleep(inp.warmup_s)
            if digest(exp_path.read_text()) != sha:
                raise ApplicationError(
                    "the experiment file changed after validation",
                    type="ExperimentInvalid",
                    non_retryable=True,
                )
            cmd = [
                sys.executable,
                "-m",
                executables.CHAOS.module,
                "--no-version-check",
                "--log-file",
                str(workdir / "chaos.log"),
                "--settings",
                str(workdir / "settings.yaml"),
                "run",
                "--journal-path",
                str(journal_path),
                "--rollback-strategy",
                "always",
                str(exp_path),
            ]
            proc = await asyncio.create_subprocess_exec(
                *cmd,
                cwd=workdir,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
                env=chaos_env(self.cfg, os.environ),
            )
            while proc.returncode is None:
                activity.heartbeat({"pid": proc.pid, "samples": len(samples)})
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), timeout=_HEARTBEAT_S)
                if time.monotonic() > deadline and proc.returncode is None:
                    await self._interrupt(proc)
            # The failover's "SLO restored" is judged under this load: it goes on for the tail.
            tail_end = min(deadline, time.monotonic() + inp.load_tail_s)
            while time.monotonic() < tail_end:
                activity.heartbeat({"tail": True, "samples": len(samples)})
                await asyncio.sleep(min(_HEARTBEAT_S, tail_end - time.monotonic()))
        except asyncio.CancelledError:
            # Answered, not propagated: the outcome below is the answer to the cancel request.
            cancelled = True
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            if proc is not None and proc.returncode is None:
                await asyncio.shield(self._interrupt(proc))
        finally:
            load.cancel()
            await asyncio.gather(load, return_exceptions=True)
        outcome = await self._outcome(inp, journal_path, workdir, proc, samples, started_at, cancelled)
        shutil.rmtree(workdir, ignore_errors=True)
        return outcome

    async def _interrupt(self, proc: asyncio.subprocess.Process) -> None:
        """SIGTERM (chaoslib interrupts and runs the rollbacks), then SIGKILL after a grace period."""
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        # Validation keeps every experiment's rollbacks inside this grace, with a margin (budget.py).
        give_up = time.monotonic() + ROLLBACK_GRACE_S
        while proc.returncode is None and time.monotonic() < give_up:
            # Keep heartbeating: rollbacks may outlast the heartbeat timeout, which would otherwise
            # fail the activity while the fault is still being undone.
            activity.heartbeat({"pid": proc.pid, "interrupting": True})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), timeout=_HEARTBEAT_S)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    async def _outcome(
        self,
        inp: ExperimentRunInput,
        journal_path: Path,
        workdir: Path,
        proc: Any,
        samples: list[LoadSample],
        started_at: datetime,
        cancelled: bool,
    ) -> ExperimentOutcome:
        journal, tail = await asyncio.to_thread(_read_run, journal_path, workdir / "chaos.log")
        verdict = judge(journal) if journal else JournalVerdict(reasons=["chaos run wrote no journal"])
        key: str | None = None
        if journal:
            try:
                key = await asyncio.to_thread(ReportStore(self.cfg).put_journal, inp.workflow_id, journal)
            except Exception as exc:  # noqa: BLE001 - a drill's verdict must not be lost to S3 trouble
                activity.logger.warning("could not store the journal of %s: %s", inp.workflow_id, exc)
        if cancelled:
            activity.logger.info("drill %s cancelled; rollbacks: %s", inp.workflow_id, verdict.rollbacks_ok)
        return ExperimentOutcome(
            exit_code=proc.returncode if proc is not None else None,
            verdict=verdict,
            journal_key=key,
            journal={k: journal.get(k) for k in ("status", "deviated", "start", "end", "duration")},
            load=sorted(samples, key=lambda s: s.t),
            started_at=started_at,
            ended_at=_now(),
            cancelled=cancelled,
            log_tail=tail,
        )

    @activity.defn(name="drill_observe")
    async def observe(self, inp: ObserveInput) -> Observation:
        """Find the run of `workflow_id` started since `since` and wait (bounded) for it to close.

        With timeout 0 it only looks. With `start_if_missing` (failback) it starts the workflow when
        nobody did within the timeout's first half, then waits for whichever run exists.
        """
        client = activity.client()
        handle = client.get_workflow_handle(inp.workflow_id)
        obs = Observation(found=False, workflow_id=inp.workflow_id)
        started = time.monotonic()
        give_up = started + inp.timeout_s
        while True:
            activity.heartbeat(obs.status)
            desc = await describe_or_none(handle)
            if desc is not None and desc.start_time >= inp.since:
                obs.found, obs.run_id, obs.started_at = True, desc.run_id, desc.start_time
                obs.status = desc.status.name if desc.status else None
                if desc.status != WorkflowExecutionStatus.RUNNING:
                    obs.closed_at = desc.close_time
                    if desc.status in (WorkflowExecutionStatus.COMPLETED, WorkflowExecutionStatus.FAILED):
                        obs.result = await _result(
                            client.get_workflow_handle(inp.workflow_id, run_id=desc.run_id)
                        )
                    return obs
            elif (
                inp.start_if_missing
                and not obs.started_by_drill
                and time.monotonic() > started + inp.timeout_s / 2
            ):
                obs.started_by_drill = await self._start_failback(inp)
            if time.monotonic() >= give_up:
                if obs.found:
                    obs.error = f"{inp.workflow_id} still {obs.status} after {inp.timeout_s:g}s"
                return obs
            await asyncio.sleep(0.5)

    @activity.defn(name="drill_monitor_check")
    async def monitor_check(self, inp: MonitorCheckInput) -> MonitorCheck:
        """What the FleetMonitor says about the fleet, as preflight problems."""
        handle = activity.client().get_workflow_handle(f"monitor/{inp.fleet}")
        try:
            desc = await handle.describe()
            if desc.status != WorkflowExecutionStatus.RUNNING:
                return MonitorCheck(running=False)
            status = await handle.query("status")
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                return MonitorCheck(running=False)
            raise
        problems: list[str] = []
        if status.get("alert"):
            problems.append(f"the monitor raises {status['alert']}")
        if status.get("paused"):
            problems.append("the monitor is paused: nothing would detect the fault")
        for name, tracker in (status.get("regions") or {}).items():
            if tracker.get("state") != "HEALTHY":
                problems.append(
                    f"the monitor sees {name} {tracker.get('state')}: {tracker.get('last_reason') or ''}".rstrip(
                        ": "
                    )
                )
        for rec in status.get("failed_over") or []:
            problems.append(f"{rec.get('source')} is failed over to {rec.get('target')} and awaits failback")
        if status.get("active_failover"):
            problems.append(f"a failover is running: {status['active_failover'].get('workflow_id')}")
        return MonitorCheck(running=True, policy=status.get("policy"), problems=problems)

    async def _start_failback(self, inp: ObserveInput) -> bool:
        from drctl.models.failover import FailbackInput

        if inp.spec is None:
            return False
        # The drill started it, on behalf of whoever started the drill (that one's DrctlInitiator).
        by = f"drctl-drill@{activity.info().workflow_id}"
        arg = FailbackInput(spec=inp.spec, region=inp.region, initiator=by)
        try:
            await start_operation(
                activity.client(),
                self.cfg,
                "Failback",
                arg,
                operation="failback",
                workflow_id=inp.workflow_id,
                target=inp.region,
                initiator=by,
            )
        except FleetBusyError as exc:
            # Someone (the monitor) started one at the same moment: observe that one instead.
            activity.logger.info("failback already started elsewhere: %s", exc)
            return False
        return True


async def _result(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    """A closed operation's result: returned when it succeeded, in the failure's details when not."""
    try:
        result = await handle.result()
    except WorkflowFailureError as exc:
        result = details_from(exc)
        if result is None:
            return {"error": str(exc.cause or exc)}
    return result if isinstance(result, dict) else {"value": result}


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    from activities import drill_faults

    return [*activity_methods(ChaosActivities(cfg)), *drill_faults.build(cfg)]
