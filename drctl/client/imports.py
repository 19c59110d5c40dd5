"""Start `ImportedOperation` for a break-glass audit record: once per record, whoever imports it.

Used by `drctl failover-import` and by the monitor's tier watch (activities/tier_watch.py), which
imports a record it finds behind weights drctl did not set, so the move is listed by `drctl ops
list` and shown in the Temporal UI without anyone having to remember the command.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from drctl.client.operations import memo_of, search_attributes, summary
from drctl.config.schema import FleetConfig
from drctl.models.breakglass import BreakGlassRecord, ImportInput, ImportResult
from drctl.models.safe_text import SUMMARY_CHARS, safe_markdown

WORKFLOW = "ImportedOperation"  # workflows/imported.py


async def start_import(
    client: Client, cfg: FleetConfig, rec: BreakGlassRecord, uri: str, who: str
) -> tuple[WorkflowHandle[Any, ImportResult], bool]:
    """The import's handle, and whether the record had been imported already (a second import finds
    the first: the workflow id is the record's, and a closed one is never reused)."""
    try:
        handle: WorkflowHandle[Any, ImportResult] = await client.start_workflow(
            WORKFLOW,
            ImportInput(record=rec, uri=uri, imported_by=who),
            id=rec.workflow_id,
            task_queue=cfg.temporal.task_queue,
            result_type=ImportResult,
            search_attributes=search_attributes(cfg.name, "failover", rec.source, rec.target, rec.who),
            memo=memo_of(cfg.name, "failover", rec.who, extra={"imported": uri}),
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            static_summary=summary(
                "imported break-glass failover", cfg.name, rec.who, rec.source, rec.target
            ),
            static_details=(
                f"**break-glass by** {safe_markdown(rec.who, limit=SUMMARY_CHARS)} from "
                f"{safe_markdown(rec.host, limit=SUMMARY_CHARS)}; **imported by** "
                f"{safe_markdown(who, limit=SUMMARY_CHARS)} from {safe_markdown(uri, limit=SUMMARY_CHARS)}"
            ),
        )
    except WorkflowAlreadyStartedError:
        return client.get_workflow_handle(rec.workflow_id, result_type=ImportResult), True
    return handle, False
