"""Plaintext reaching a codec worker through every door: an activity's input, an update, a signal and a
query, on a real Temporal dev server. Each is refused with the reason, and none is retried forever.

The sender is a client (or a workflow worker) without the codec, as a tool or a misconfigured
worker would be; the receiver is built from drctl's own codec connection (`connect`), so it has
drctl's data converter and interceptor exactly as `drctl worker` does.
"""

from __future__ import annotations

import asyncio
import base64
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
import pytest_asyncio
from temporalio import activity, workflow
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from drctl.client.connection import connect
from drctl.config.schema import load_config
from tests.support.config import write_fleet_config
from tests.support.wait import assert_eventually

KEY = base64.b64encode(b"p" * 32).decode()
RAN: list[str] = []  # what the activity under test was given, when it ran at all


@activity.defn(name="plaintext_record")
def record(note: str) -> str:
    RAN.append(note)
    return note


@workflow.defn(sandboxed=False)
class CallRecord:
    """Runs `plaintext_record` on the queue given, with the SDK's default (unlimited) retries: only a
    non-retryable failure ends it."""

    @workflow.run
    async def run(self, queue: str) -> str:
        return await workflow.execute_activity(
            record, "planted note", task_queue=queue, start_to_close_timeout=timedelta(seconds=10)
        )


@workflow.defn(sandboxed=False)
class Mailbox:
    """Takes notes by signal and update; a query reads them back."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.done = False

    @workflow.run
    async def run(self) -> list[str]:
        await workflow.wait_condition(lambda: self.done)
        return self.notes

    @workflow.signal
    def note(self, text: str) -> None:
        self.notes.append(text)

    @workflow.signal
    def close(self) -> None:
        self.done = True

    @workflow.update
    def add(self, text: str) -> int:
        self.notes.append(text)
        return len(self.notes)

    @workflow.query
    def starting(self, prefix: str) -> list[str]:
        return [n for n in self.notes if n.startswith(prefix)]


@pytest_asyncio.fixture(scope="module")
async def clients(
    temporal_env: WorkflowEnvironment, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Client, Client]]:
    """(a client without the codec, drctl's codec client) on the module's dev server."""
    address = temporal_env.client.service_client.config.target_host
    path = write_fleet_config(
        tmp_path_factory.mktemp("plain"),
        {"temporal": {"address": address, "codec": {"keys_env": "DRCTL_PLAINTEXT_TEST_KEYS"}}},
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DRCTL_PLAINTEXT_TEST_KEYS", f"k1={KEY}")
        sealed = await connect(load_config(path))
    plain = await Client.connect(address, data_converter=pydantic_data_converter)
    yield plain, sealed


def _queue(what: str) -> str:
    return f"plaintext-{what}-{uuid.uuid4().hex[:8]}"


async def test_an_activity_given_plaintext_fails_non_retryably_without_running(
    clients: tuple[Client, Client],
) -> None:
    plain, sealed = clients
    workflows, activities = _queue("wf"), _queue("act")
    RAN.clear()
    with ThreadPoolExecutor(max_workers=2) as pool:
        async with (
            Worker(
                plain,
                task_queue=workflows,
                workflows=[CallRecord],
                workflow_runner=UnsandboxedWorkflowRunner(),
            ),
            Worker(sealed, task_queue=activities, activities=[record], activity_executor=pool),
        ):
            handle = await plain.start_workflow(
                CallRecord.run, activities, id=f"plaintext-act-{uuid.uuid4().hex[:8]}", task_queue=workflows
            )
            with pytest.raises(WorkflowFailureError) as err:
                # Bounded: a retryable refusal would retry the activity forever.
                await asyncio.wait_for(handle.result(), timeout=30)
    cause = err.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError), cause
    assert cause.cause.type == "PlaintextRefused" and cause.cause.non_retryable
    assert "plaintext payload refused" in cause.cause.message
    assert cause.retry_state is not None and cause.retry_state.name == "NON_RETRYABLE_FAILURE"
    assert RAN == []  # refused before the activity's code ran


async def test_updates_queries_and_signals_in_plaintext_are_refused(clients: tuple[Client, Client]) -> None:
    plain, sealed = clients
    queue = _queue("mailbox")
    async with Worker(
        sealed, task_queue=queue, workflows=[Mailbox], workflow_runner=UnsandboxedWorkflowRunner()
    ):
        wid = f"plaintext-mailbox-{uuid.uuid4().hex[:8]}"
        own = await sealed.start_workflow(Mailbox.run, id=wid, task_queue=queue)
        assert await own.execute_update(Mailbox.add, "sealed-1") == 1
        intruder = plain.get_workflow_handle(wid)
        with pytest.raises(WorkflowUpdateFailedError) as upd:
            await intruder.execute_update(Mailbox.add, "plain-update")
        assert isinstance(upd.value.cause, ApplicationError), upd.value.cause
        assert "plaintext payload refused" in upd.value.cause.message
        with pytest.raises(WorkflowQueryFailedError, match="plaintext payload refused"):
            await intruder.query(Mailbox.starting, "sealed")
        # A signal it cannot read is dropped: the one sent after it arrives, the plaintext one never.
        await intruder.signal(Mailbox.note, "plain-signal")
        await own.signal(Mailbox.note, "sealed-2")

        async def both_sealed() -> list[str] | None:
            notes: list[str] = await own.query(Mailbox.starting, "")
            return notes if "sealed-2" in notes else None

        notes = await assert_eventually(both_sealed, timeout_s=30, what="the sealed signal arrived")
        assert notes == ["sealed-1", "sealed-2"]
        await own.signal(Mailbox.close)
        result: Any = await own.result()
        assert result == ["sealed-1", "sealed-2"]
