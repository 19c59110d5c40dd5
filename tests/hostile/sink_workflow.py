"""A workflow that puts one text in every Temporal UI sink an operation writes, run in the sandbox.

Its phase title, details and a fact (current details, markdown), an activity's summary and, through
the product's Notifier, the Notify child's static summary and the webhook it delivers. Kept apart
from the test module so the sandbox imports only what a product workflow may.
"""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from drctl.models.fleet_spec import FleetSpec
    from drctl.models.notify import Event
    from workflows import calls
    from workflows.common import Phases
    from workflows.notify import Notifier


class SinkInput(BaseModel):
    text: str
    spec: FleetSpec


@workflow.defn(name="HostileSinks")
class HostileSinks:
    @workflow.run
    async def run(self, inp: SinkInput) -> None:
        phases = Phases("hostile", inp.text)
        phases.note(inp.text, inp.text)
        phases.enter("observe", inp.text)
        await calls.get_global_weights(summary=f"read weights for {inp.text}")
        notifier = Notifier(inp.spec)
        notifier.emit(
            Event(
                kind="failover.started",
                fleet=inp.spec.fleet,
                summary=inp.text,
                severity="warning",
                dedup_key="hostile",
                workflow_id=workflow.info().workflow_id,
                at=workflow.now(),
                details={"reason": inp.text},
            )
        )
        await notifier.flush()
