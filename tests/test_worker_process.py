"""The worker as Kubernetes runs it: a real `drctl worker` process, SIGTERM mid-activity, JSON logs.

The activity under test is the product's own `verify_global`, held open by a global endpoint that
answers only when the test lets it, so "an activity is running" is a fact, not a sleep.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from drctl.config.schema import load_config
from drctl.worker import logs
from tests.support.config import write_fleet_config
from tests.support.http_stub import Reply, Request, StubServer
from tests.support.temporal import CallVerifyGlobal
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[1]
# The test's workflow runs on its own queue: the worker process serves the main queue's workflows.
TEST_QUEUE = f"test-{uuid.uuid4().hex[:8]}"


class _Gate:
    """A global endpoint that holds every completion until released."""

    def __init__(self) -> None:
        self.hit = threading.Event()
        self.release = threading.Event()
        self.answered = threading.Event()  # a held completion was let through (released or at 60 s)
        self.server = StubServer(self._answer).start()
        self.url = self.server.url

    def _answer(self, _req: Request) -> Reply:
        self.hit.set()
        self.release.wait(60)
        self.answered.set()
        return Reply(200, {"choices": [{"text": "ok"}]})

    def close(self) -> None:
        self.release.set()
        self.server.close()


@pytest.fixture
def gate() -> Iterator[_Gate]:
    g = _Gate()
    yield g
    g.close()


# The test's workflow holds one verification on the region queue the worker process serves.
VERIFY = {"requests": 1, "timeout_s": 60, "request_timeout_s": 60}


def _config(temporal_env: WorkflowEnvironment, gate: _Gate, grace_s: float) -> Path:
    return write_fleet_config(
        overrides={
            "temporal": {
                "address": temporal_env.client.service_client.config.target_host,
                "task_queue": f"main-{uuid.uuid4().hex[:8]}",
            },
            "traffic": {"global_endpoint": gate.url},
            "worker": {"graceful_shutdown_s": grace_s},
        }
    )


class _WorkerProcess:
    def __init__(self, config: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "drctl",
                "worker",
                "-c",
                str(config),
                "--region",
                "us-west-1",
                "--log-format",
                "json",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def logged(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._reader.join(5)


async def _start(
    temporal_env: WorkflowEnvironment, config: Path, gate: _Gate
) -> tuple[_WorkerProcess, object]:
    cfg = load_config(config)
    proc = _WorkerProcess(config)
    await asyncio.to_thread(
        wait_until,
        lambda: proc.logged("serving task queues") or proc.proc.poll() is not None,
        30,
        what="worker process start",
    )
    assert proc.proc.poll() is None, "\n".join(proc.lines)
    call = {"queue": cfg.region("us-west-1").queue, "input": VERIFY, "start_to_close_s": 90}
    handle = await temporal_env.client.start_workflow(
        CallVerifyGlobal.run, call, id=f"drill/test/{uuid.uuid4().hex[:8]}", task_queue=TEST_QUEUE
    )
    return proc, handle


@asynccontextmanager
async def _held(
    temporal_env: WorkflowEnvironment, gate: _Gate, grace_s: float
) -> AsyncIterator[tuple[_WorkerProcess, Any]]:
    """A worker process whose one verification is held at the gate; stopped when the block exits."""
    config = _config(temporal_env, gate, grace_s=grace_s)
    async with Worker(temporal_env.client, task_queue=TEST_QUEUE, workflows=[CallVerifyGlobal]):
        proc, handle = await _start(temporal_env, config, gate)
        try:
            assert await asyncio.to_thread(gate.hit.wait, 30), (
                "the activity never reached the global endpoint"
            )
            yield proc, handle
        finally:
            proc.stop()


async def test_sigterm_lets_the_running_activity_finish(
    temporal_env: WorkflowEnvironment, gate: _Gate
) -> None:
    async with _held(temporal_env, gate, grace_s=30) as (proc, handle):
        proc.proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(wait_until, lambda: proc.logged("running activities have 30s to finish"), 10)
        await asyncio.sleep(1.0)
        assert proc.proc.poll() is None, "the worker exited while its activity was still running"
        gate.release.set()
        result = await handle.result()  # type: ignore[attr-defined]
        assert result["ok"] == 1 and result["errors"] == 0
        assert await asyncio.to_thread(proc.proc.wait, 30) == 0, "\n".join(proc.lines[-20:])
    assert proc.logged("drctl worker stopped")
    for line in proc.lines:  # --log-format json: every line one object carrying the context fields
        record = json.loads(line)
        assert set(logs.CONTEXT_FIELDS) <= set(record), line
        assert record["fleet"] == "test" and record["region"] == "us-west-1", line


async def test_sigterm_cancels_an_activity_that_outlives_the_grace_period(
    temporal_env: WorkflowEnvironment, gate: _Gate
) -> None:
    async with _held(temporal_env, gate, grace_s=1) as (proc, handle):
        proc.proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.proc.wait, 20) == 0, "\n".join(proc.lines[-20:])
        # Ordering, not a stopwatch: the worker was gone while its activity's request was still held.
        assert not gate.answered.is_set()
        with pytest.raises(WorkflowFailureError):
            await handle.result()  # type: ignore[attr-defined]


# --- JSON log context from activity and workflow loggers, in process ------------------------------


@activity.defn(name="log_something")
async def log_something() -> None:
    activity.logger.info("through the activity logger")
    logging.getLogger("drctl.providers.example").warning("through a plain logger")


@workflow.defn(sandboxed=False)
class LogSomething:
    @workflow.run
    async def run(self, queue: str) -> None:
        workflow.logger.info("through the workflow logger")
        await workflow.execute_activity(
            log_something, task_queue=queue, start_to_close_timeout=timedelta(seconds=30)
        )


async def test_json_lines_carry_fleet_region_operation_and_workflow_id(
    temporal_env: WorkflowEnvironment,
) -> None:
    cfg = load_config(
        write_fleet_config(overrides={"temporal": {"task_queue": f"main-{uuid.uuid4().hex[:8]}"}})
    )
    east = cfg.region("us-east-1").queue
    buf = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    logs.setup("json", cfg, None, stream=buf)
    wid = f"failover/test-{uuid.uuid4().hex[:6]}"
    try:
        async with (
            Worker(temporal_env.client, task_queue=cfg.temporal.task_queue, workflows=[LogSomething]),
            Worker(temporal_env.client, task_queue=east, activities=[log_something]),
        ):
            await temporal_env.client.execute_workflow(
                LogSomething.run, east, id=wid, task_queue=cfg.temporal.task_queue
            )
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
        activity.logger.activity_info_on_message = True
        workflow.logger.workflow_info_on_message = True
    records = [json.loads(line) for line in buf.getvalue().splitlines()]
    by_message = {r["message"]: r for r in records}
    for message, region in [
        ("through the workflow logger", None),
        ("through the activity logger", "us-east-1"),
        ("through a plain logger", "us-east-1"),
    ]:
        r = by_message[message]
        assert (r["fleet"], r["workflow_id"], r["operation"], r["region"]) == (
            "test",
            wid,
            "failover",
            region,
        ), r
    assert by_message["through the activity logger"]["activity"] == "log_something"
    assert by_message["through the workflow logger"]["workflow_type"] == "LogSomething"
