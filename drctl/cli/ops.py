"""`drctl ops list|show|watch|approve|reject|abort`: any running or recent operation, by workflow id.

Who started each one (DrctlInitiator) is listed and shown; `-` for one started before it was recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from drctl.cli import common, complete

# The Temporal client, the models and the other commands' renderers load when a command runs, not
# for -h or Tab completion (bench/cli_latency.py).
if TYPE_CHECKING:
    from pydantic import BaseModel
    from temporalio.client import Client, WorkflowHandle

    from drctl.cli.launch import Launched
    from drctl.config.schema import FleetConfig

app = typer.Typer(
    name="ops",
    help="Running and recent operations (failover, failback, upgrade, migrate, drill).",
    no_args_is_help=True,
)

WorkflowId = Annotated[
    str, typer.Argument(help="Workflow id, e.g. failover/dev.", autocompletion=complete.operation_ids)
]


# Per operation (the DrctlOperation search attribute): its result model and how the command that
# starts it renders that result (table, and JSON where it differs from the default), so `ops watch`
# ends exactly as the start command would have.
def _results() -> dict[
    str, tuple[type[BaseModel], Callable[[Any, str], None], Callable[[Launched[Any]], Any] | None]
]:
    from drctl.cli import backup, drill, failover, upgrade
    from drctl.cli.launch import result_only
    from drctl.cli.rebalance import render_rebalance
    from drctl.models.backup import BackupJobResult
    from drctl.models.drill import DrillReport
    from drctl.models.failover import FailbackResult, FailoverResult
    from drctl.models.migration import MigrationResult
    from drctl.models.rebalance import RebalanceResult
    from drctl.models.upgrade import UpgradeResult

    return {
        "failover": (FailoverResult, failover.render_failover, None),
        "failback": (FailbackResult, failover.render_failback, None),
        "upgrade": (UpgradeResult, upgrade.render, None),
        "migrate": (MigrationResult, upgrade.render, None),
        "rebalance": (RebalanceResult, render_rebalance, None),
        "drill": (DrillReport, drill.render_report, result_only),
        "restore": (BackupJobResult, backup.render_job, backup.job_json),
        "backup": (BackupJobResult, backup.render_job, backup.job_json),
    }


NOT_RECORDED = "-"  # an operation started before drctl recorded who started it


async def _handle(client: Client, cfg: FleetConfig, wid: str) -> WorkflowHandle[Any, Any]:
    from temporalio.service import RPCError

    handle = client.get_workflow_handle(wid)
    try:
        await handle.describe()
    except RPCError:
        raise common.UserError(
            f"no operation {wid!r} in namespace {cfg.temporal.namespace}; see `drctl ops list`"
        ) from None
    return handle


@app.command("list")
def list_cmd(
    config: common.ConfigOpt = common.CONFIG,
    all_: Annotated[
        bool, typer.Option("--all", help="Include finished operations (most recent 20).")
    ] = False,
    output: common.OutputOpt = common.TABLE,
) -> None:
    """Operations on this fleet: running ones by default."""
    from rich.table import Table

    from drctl.client.connection import connect
    from drctl.client.operations import list_operations, visibility_query

    cfg = common.load(config)
    query = visibility_query(cfg.name)
    if all_:
        query = query.replace(" AND ExecutionStatus = 'Running'", "")

    async def go() -> list[Any]:
        return await list_operations(await connect(cfg), cfg.name, query, cfg, limit=20 if all_ else 50)

    found = common.run_async(go)
    if common.printed_json(output, found):
        return
    if not found:
        common.console.print(f"no {'' if all_ else 'running '}operations on fleet {cfg.name!r}")
        return
    t = Table(title=f"fleet {cfg.name}: operations")
    for col in ("workflow id", "operation", "status", "phase", "source", "target", "started", "by", "UI"):
        t.add_column(col, overflow="fold")
    for o in found:
        t.add_row(
            o.workflow_id,
            o.operation,
            o.status,
            o.phase or "",
            o.source or "",
            o.target or "",
            o.start_time.isoformat(timespec="seconds") if o.start_time else "",
            o.initiator or NOT_RECORDED,
            o.ui_link or "",
        )
    common.console.print(t)


async def _show(cfg: FleetConfig, workflow_id: str) -> dict[str, Any]:
    from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

    from drctl.cli.launch import query_progress
    from drctl.client.connection import connect, ui_link
    from drctl.models import search_attributes as sa
    from drctl.models.outcome import details_from

    handle = await _handle(await connect(cfg), cfg, workflow_id)
    desc = await handle.describe()
    prog = await query_progress(handle)
    result = None
    if desc.status == WorkflowExecutionStatus.COMPLETED:
        result = await handle.result()
    elif desc.status == WorkflowExecutionStatus.FAILED:
        # An operation that did not succeed carries its result in the failure's details.
        try:
            await handle.result()
        except WorkflowFailureError as exc:
            result = details_from(exc) or {"error": str(exc.cause or exc)}
    attrs = desc.typed_search_attributes
    return {
        "workflow_id": workflow_id,
        "run_id": desc.run_id,
        "status": desc.status.name if desc.status else "?",
        "operation": attrs.get(sa.OPERATION),
        "phase": attrs.get(sa.PHASE),
        "initiator": attrs.get(sa.INITIATOR),
        "progress": prog.model_dump(mode="json") if prog else None,
        "result": result,
        "ui_link": ui_link(cfg, workflow_id, desc.run_id),
    }


@app.command("show")
def show(
    workflow_id: WorkflowId, config: common.ConfigOpt = common.CONFIG, output: common.OutputOpt = common.TABLE
) -> None:
    """One operation: status, phase timings, and its result when finished."""
    from drctl.cli.launch import progress_table
    from drctl.models.phases import OperationProgress

    cfg = common.load(config)
    info = common.run_async(lambda: _show(cfg, workflow_id))
    if common.printed_json(output, info):
        return
    prog = OperationProgress.model_validate(info["progress"]) if info["progress"] else None
    common.console.print(progress_table(workflow_id, prog, info["status"]))
    who = [f"started by {info['initiator'] or NOT_RECORDED}"]
    result = info["result"] if isinstance(info["result"], dict) else {}
    who += [f"{k.replace('_', ' ')} {result[k]}" for k in ("approved_by", "rejected_by") if result.get(k)]
    common.console.print(", ".join(who), markup=False, highlight=False)
    if info["result"] is not None:
        common.console.print_json(data=info["result"])
    common.console.print(f"UI: {info['ui_link']}")


@app.command("watch")
def watch_cmd(
    workflow_id: WorkflowId,
    config: common.ConfigOpt = common.CONFIG,
    timeout: common.Timeout = None,
    output: common.OutputOpt = common.TABLE,
) -> None:
    """Follow an operation until it ends (after Ctrl-C or --no-wait); exit with its exit code.

    A finished operation is not waited for: its result and exit code are shown at once.
    """
    from drctl.cli.launch import Launched, conclude, reattach_hint, watch
    from drctl.client.connection import connect, ui_link
    from drctl.models import search_attributes as sa

    cfg = common.load(config)
    results = _results()

    async def go() -> tuple[str, Launched[Any]]:
        client = await connect(cfg)
        desc = await (await _handle(client, cfg, workflow_id)).describe()
        operation = desc.typed_search_attributes.get(sa.OPERATION) or ""
        if operation not in results:
            raise common.UserError(
                f"{workflow_id} is a {operation or 'non-drctl'} workflow, not an operation drctl "
                f"can watch ({', '.join(results)}); see `drctl ops show {workflow_id}`"
            )
        # This run, not a later one started under the same id while we watch.
        run = client.get_workflow_handle(workflow_id, run_id=desc.run_id)
        link = ui_link(cfg, workflow_id, desc.run_id)
        shown = not common.is_document(output)
        done = await watch(run, results[operation][0], show=shown, timeout_s=timeout, link=link)
        return operation, Launched(workflow_id, link, done)

    with reattach_hint([workflow_id]):
        operation, launched = common.run_async(go)
    _, render, as_json = results[operation]
    conclude(launched, output, render, as_json)


def _me(cfg: FleetConfig, given: str | None = None) -> str:
    """Who is acting: `given` (an option), else DRCTL_IDENTITY, temporal.identity or user@host."""
    from drctl.client.identity import IdentityError, checked
    from drctl.client.identity import identity as acting_identity

    try:
        return checked(given, "--approver") if given is not None else acting_identity(cfg)
    except IdentityError as exc:
        raise common.UserError(str(exc)) from None


@app.command("approve")
def approve(
    workflow_id: Annotated[str, typer.Argument(help="Workflow id waiting at its approval gate.")],
    config: common.ConfigOpt = common.CONFIG,
    approver: Annotated[
        str | None,
        typer.Option(
            help="Who approves, recorded in the result and history. Default: your drctl identity "
            "(DRCTL_IDENTITY, temporal.identity, or user@host). A failover's initiator may not approve it."
        ),
    ] = None,
    comment: Annotated[str, typer.Option(help="Why.")] = "",
    output: common.OutputOpt = common.TABLE,
) -> None:
    """Approve an operation waiting at its approval gate (refused if it is not waiting, or if you started it)."""
    from drctl.models.phases import UPDATE_APPROVE, ApproveInput

    cfg = common.load(config)
    inp = ApproveInput(approver=_me(cfg, approver), comment=comment)
    answer = common.run_async(lambda: _update(cfg, workflow_id, UPDATE_APPROVE, inp))
    _answered(output, workflow_id, "approve", answer, by=inp.approver)


@app.command("reject")
def reject(
    workflow_id: Annotated[str, typer.Argument(help="Workflow id waiting at its approval gate.")],
    config: common.ConfigOpt = common.CONFIG,
    reason: Annotated[str, typer.Option(help="Why, recorded in the result and history.")] = "rejected",
    output: common.OutputOpt = common.TABLE,
) -> None:
    """Refuse an operation waiting at its approval gate: it ends aborted, having changed nothing."""
    from drctl.models.phases import UPDATE_REJECT, RejectInput

    cfg = common.load(config)
    if not reason.strip():
        raise common.UserError("--reason: give a reason (it is recorded in the result)")
    inp = RejectInput(by=_me(cfg), reason=reason.strip())
    answer = common.run_async(lambda: _update(cfg, workflow_id, UPDATE_REJECT, inp))
    _answered(output, workflow_id, "reject", answer, by=inp.by, reason=inp.reason)


@app.command("abort")
def abort(
    workflow_id: Annotated[str, typer.Argument(help="Workflow id to abort.")],
    config: common.ConfigOpt = common.CONFIG,
    reason: Annotated[str, typer.Option(help="Why, recorded in the result.")] = "aborted by operator",
    output: common.OutputOpt = common.TABLE,
    yes: common.YesOpt = False,
) -> None:
    """Ask an operation to stop at its next safe point (rejected once it is past no-return)."""
    from drctl.models.phases import UPDATE_ABORT, AbortInput

    cfg = common.load(config)
    # An abort ends a failover before its shift, rolls an upgrade back, stops a drill: it changes
    # what the fleet will do, so it is confirmed as `upgrade abort` is.
    common.confirm(
        yes,
        f"Abort {workflow_id} at its next safe point? What it has not done yet will not be done.",
        f"abort {workflow_id}",
    )
    answer = common.run_async(lambda: _update(cfg, workflow_id, UPDATE_ABORT, AbortInput(reason=reason)))
    _answered(output, workflow_id, "abort", answer, reason=reason)


def _answered(output: common.Output, workflow_id: str, update: str, answer: str, **asked: str) -> None:
    """The workflow's answer to an accepted update: its line, or one document for scripts
    ({"workflow_id", "update", "answer", and what was asked: by, reason})."""
    if not common.printed_json(
        output, {"workflow_id": workflow_id, "update": update, "answer": answer, **asked}
    ):
        common.console.print(answer)


async def _update(cfg: FleetConfig, wid: str, name: str, arg: Any) -> str:
    from temporalio.client import WorkflowUpdateFailedError
    from temporalio.service import RPCError

    from drctl.client.connection import connect

    handle = await _handle(await connect(cfg), cfg, wid)
    try:
        return str(await handle.execute_update(name, arg, result_type=str))
    except WorkflowUpdateFailedError as exc:
        raise common.UserError(f"{name} refused by {wid}: {exc.cause or exc}") from None
    except RPCError as exc:
        raise common.UserError(f"{name} failed for {wid}: {exc.message}") from None
