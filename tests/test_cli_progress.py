"""Progress without a terminal: one line per phase change, so a CI log shows a long operation moving.

A workflow of the test's own walks through phases on a real Temporal dev server, answering the same
`progress` query drctl's operations answer; the CLI's `watch` follows it with stdout captured (not a
terminal), polling much faster than the phases change.
"""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from temporalio import workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from drctl.cli.errors import StillRunning
from drctl.cli.launch import watch
from drctl.models.phases import QUERY_PROGRESS, OperationProgress

STEPS = [
    ("preflight", "target us-east-1 healthy"),
    ("shift", "weights us-west-1=0 us-east-1=100"),
    ("verify", ""),
]


@workflow.defn(sandboxed=False)
class Phased:
    """Enters each (phase, details) of its input in turn, 0.6 s apart."""

    def __init__(self) -> None:
        self.now = OperationProgress(operation="test", phase="starting")

    @workflow.run
    async def run(self, steps: list[tuple[str, str]]) -> OperationProgress:
        for phase, details in steps:
            self.now = OperationProgress(operation="test", phase=phase, details=details)
            await workflow.sleep(timedelta(seconds=0.6))
        return self.now

    @workflow.query(name=QUERY_PROGRESS)
    def progress(self) -> OperationProgress:
        return self.now


async def test_without_a_terminal_each_phase_change_is_one_line(
    temporal_env: WorkflowEnvironment, capsys: pytest.CaptureFixture[str]
) -> None:
    client, queue = temporal_env.client, f"phased-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=queue, workflows=[Phased], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        handle = await client.start_workflow(Phased.run, STEPS, id=f"phased/{queue}", task_queue=queue)
        done = await watch(handle, OperationProgress, show=True, poll_s=0.1)
    assert done.result.phase == "verify" and not done.failed
    lines = capsys.readouterr().out.splitlines()
    line = re.compile(rf"^\d\d:\d\d:\d\d {re.escape(handle.id)}  phase=(\S+)(?:  (.*))?$")
    seen = [m.groups() for m in map(line.match, lines) if m]
    assert len(seen) == len(lines), lines  # nothing else on stdout: no live table, no escape codes
    # Polled every 0.1 s for 1.8 s, yet one line per change ("starting" only if polled before the first).
    assert [(p, d or "") for p, d in seen if p != "starting"] == STEPS, lines


async def test_a_timeout_ends_the_wait_not_the_operation(temporal_env: WorkflowEnvironment) -> None:
    client, queue = temporal_env.client, f"phased-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=queue, workflows=[Phased], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        handle = await client.start_workflow(Phased.run, STEPS, id=f"phased/{queue}", task_queue=queue)
        with pytest.raises(StillRunning) as waited:
            await watch(handle, OperationProgress, show=True, poll_s=0.1, timeout_s=0.5, link="http://ui")
        assert f"drctl ops watch {handle.id}` or http://ui" in str(waited.value)
        # The operation went on and finished by itself.
        assert (await handle.result()).phase == "verify"
