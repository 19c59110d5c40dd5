"""A seventh operation is only its phases: a toy written here gets the claim, progress query, abort
update, finish and conclude (lock given back, Failed with its result) from
`workflows.operation.Operation`, on the session dev stack's Temporal server with the real fleet
lock (`FleetLock` and its activities)."""

from __future__ import annotations

import uuid

import pytest
from pydantic import BaseModel
from temporalio import workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from activities.operations import OperationActivities
from drctl.config.schema import FleetConfig
from drctl.models import phases
from drctl.models import search_attributes as sa
from drctl.models.outcome import error_type, result_from
from drctl.models.phases import AbortInput, OperationProgress
from tests.support.config import tuned
from tests.support.wait import assert_eventually
from workflows.lock import FleetLock
from workflows.operation import Aborted, Operation

pytestmark = [pytest.mark.devstack]


class ToyResult(BaseModel):
    outcome: str
    error: str | None = None


@workflow.defn(name="ToyOperation", sandboxed=False)
class Toy(Operation):
    OPERATION, TITLE = "toy", "Toy operation"

    @workflow.run
    async def run(self, fleet: str) -> ToyResult:
        return await self.conclude(self._phases(fleet), lambda res: res.error)

    async def _phases(self, fleet: str) -> ToyResult:
        await self.claim(fleet)
        try:
            self.phases.enter("work", "waiting for an abort")
            await self.abortable(workflow.wait_condition(lambda: False))
            return ToyResult(outcome="never")
        except Aborted:
            await self.finish("aborted", f"aborted: {self.abort_reason}", ok=False)
            return ToyResult(outcome="aborted", error=f"aborted: {self.abort_reason}")


async def _working(client: Client, wid: str) -> bool:
    progress = await client.get_workflow_handle(wid).query(
        phases.QUERY_PROGRESS, result_type=OperationProgress
    )
    return progress.phase == "work"


async def test_toy_operation_gets_claim_progress_abort_and_finish_from_the_base(
    temporal_client: Client, fleet_config: FleetConfig
) -> None:
    queue = f"toy-{uuid.uuid4().hex[:8]}"
    cfg = tuned(fleet_config, "temporal", task_queue=queue)
    lock = OperationActivities(cfg)
    client = Client(
        temporal_client.service_client,
        namespace=temporal_client.namespace,
        data_converter=pydantic_data_converter,
    )
    fleet = f"toy-{uuid.uuid4().hex[:8]}"  # its own lock, shared with no other test
    async with Worker(
        client,
        task_queue=queue,
        workflows=[Toy, FleetLock],
        activities=[lock.acquire_fleet, lock.holders_closed],
    ):
        first = await client.start_workflow(Toy.run, fleet, id=f"toy/{fleet}/1", task_queue=queue)
        await assert_eventually(
            lambda: _working(client, first.id), timeout_s=30, what="the first toy holds the fleet and works"
        )

        # Claim: a second toy on the same fleet is refused as busy, naming the holder.
        second = await client.start_workflow(Toy.run, fleet, id=f"toy/{fleet}/2", task_queue=queue)
        with pytest.raises(WorkflowFailureError) as refused:
            await second.result()
        assert error_type(refused.value) == phases.FLEET_BUSY and first.id in str(refused.value.cause), (
            refused.value
        )

        # Abort: the validator's hook accepts it, the abort point raises, finish records the verdict.
        answer = await first.execute_update(
            phases.UPDATE_ABORT, AbortInput(reason="toy test", by="pytest"), result_type=str
        )
        assert answer == "abort requested in phase work"
        # Conclude: the failure the toy names ends the workflow Failed, carrying its result.
        with pytest.raises(WorkflowFailureError) as aborted:
            await first.result()
        assert result_from(aborted.value, ToyResult) == ToyResult(
            outcome="aborted", error="aborted: toy test (by pytest)"
        )
        desc = await first.describe()
        assert desc.typed_search_attributes.get(sa.VERDICT) == "aborted"
        assert desc.typed_search_attributes.get(sa.PHASE) == phases.PHASE_FAILED
        progress = await first.query(phases.QUERY_PROGRESS, result_type=OperationProgress)
        assert [p.phase for p in progress.phases] == [phases.PHASE_CLAIM, "work"]

        # Release: the lock was given back, so a third toy gets the fleet.
        third = await client.start_workflow(Toy.run, fleet, id=f"toy/{fleet}/3", task_queue=queue)
        await assert_eventually(
            lambda: _working(client, third.id), timeout_s=30, what="the third toy got the released fleet"
        )
        await third.execute_update(
            phases.UPDATE_ABORT, AbortInput(reason="done", by="pytest"), result_type=str
        )
        with pytest.raises(WorkflowFailureError) as aborted:
            await third.result()
        third_result = result_from(aborted.value, ToyResult)
        assert third_result is not None and third_result.error == "aborted: done (by pytest)"
