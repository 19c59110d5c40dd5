"""`drctl ops list|show|approve|abort`, and the live progress view shared by operation commands."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.table import Table
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError

from drctl import search_attributes as sa
from drctl.cli.common import (
    DEFAULT_CONFIG,
    ConfigOpt,
    Output,
    OutputOpt,
    UserError,
    console,
    load,
    print_json,
    run_async,
)
from drctl.config import FleetConfig
from drctl.models.ops import (
    QUERY_PROGRESS,
    UPDATE_ABORT,
    UPDATE_APPROVE,
    AbortInput,
    ApproveInput,
    OperationProgress,
)
from drctl.operations import list_operations, running_operations, visibility_query
from drctl.outcome import Finished, M, details_from, finished
from drctl.temporal import connect, ui_link


def progress_table(wid: str, p: OperationProgress | None, status: str) -> Table:
    t = Table(title=f"{wid}: {status}" + (f", phase {p.phase}" if p else ""), expand=False)
    t.add_column("phase")
    t.add_column("seconds", justify="right")
    for ph in (p.phases if p else []):
        t.add_row(ph.phase, "…" if ph.duration_s is None else f"{ph.duration_s:.2f}")
    if p and p.awaiting_approval:
        t.caption = f"waiting for approval: drctl ops approve {wid}"
    elif p and p.details:
        t.caption = p.details
    return t


async def query_progress(handle: WorkflowHandle[Any, Any]) -> OperationProgress | None:
    try:
        return await handle.query(QUERY_PROGRESS, result_type=OperationProgress)
    except RPCError:
        return None  # not yet picked up by a worker, or no such query on this workflow type


async def watch(handle: WorkflowHandle[Any, Any], result_type: type[M], show: bool = True,
                poll_s: float = 0.5) -> Finished[M]:
    """Wait for the operation to close, showing the phases live (when `show`).

    An operation that did not succeed ends Failed; its result comes from the failure's details.
    """
    result_task = asyncio.ensure_future(finished(handle, result_type))
    if not show:
        return await result_task
    with Live(progress_table(handle.id, None, "starting"), console=console, refresh_per_second=4, transient=False) as live:
        while not result_task.done():
            live.update(progress_table(handle.id, await query_progress(handle), "running"))
            await asyncio.wait([result_task], timeout=poll_s)
        done = result_task.result() if result_task.exception() is None else None
        status = "finished" if done is None else ("failed" if done.failed else "completed")
        live.update(progress_table(handle.id, await query_progress(handle), status))
    return result_task.result()


def exit_code(done: Finished[Any]) -> int:
    """The same for every command: 0 succeeded, 1 ran and did not succeed, 3 the fleet was busy."""
    return 3 if done.busy else (1 if done.failed else 0)


async def _handle(client: Client, cfg: FleetConfig, wid: str) -> WorkflowHandle[Any, Any]:
    handle = client.get_workflow_handle(wid)
    try:
        await handle.describe()
    except RPCError:
        raise UserError(f"no operation {wid!r} in namespace {cfg.temporal.namespace}; see `drctl ops list`") from None
    return handle


def register(app: typer.Typer) -> None:
    ops_app = typer.Typer(help="Running and recent operations (failover, failback, upgrade, migrate, drill).",
                          no_args_is_help=True)
    app.add_typer(ops_app, name="ops")

    @ops_app.command("list")
    def list_cmd(
        config: ConfigOpt = Path(DEFAULT_CONFIG),
        all_: Annotated[bool, typer.Option("--all", help="Include finished operations (most recent 20).")] = False,
        output: OutputOpt = Output.table,
    ) -> None:
        """Operations on this fleet: running ones by default."""
        cfg = load(config)

        async def go() -> list[Any]:
            client = await connect(cfg)
            if not all_:
                return await running_operations(client, cfg)
            q = visibility_query(cfg.name).replace(" AND ExecutionStatus = 'Running'", "")
            return await list_operations(client, cfg.name, q, cfg, limit=20)

        found = run_async(go)
        if output is Output.json:
            print_json([o.model_dump(mode="json") for o in found])
            return
        if not found:
            console.print(f"no {'' if all_ else 'running '}operations on fleet {cfg.name!r}")
            return
        t = Table(title=f"fleet {cfg.name}: operations")
        for col in ("workflow id", "operation", "status", "phase", "source", "target", "started", "UI"):
            t.add_column(col)
        for o in found:
            t.add_row(o.workflow_id, o.operation, o.status, o.phase or "", o.source or "", o.target or "",
                      o.start_time.isoformat(timespec="seconds") if o.start_time else "", o.ui_link or "")
        console.print(t)

    @ops_app.command("show")
    def show(
        workflow_id: Annotated[str, typer.Argument(help="Workflow id, e.g. failover/dev.")],
        config: ConfigOpt = Path(DEFAULT_CONFIG),
        output: OutputOpt = Output.table,
    ) -> None:
        """One operation: status, phase timings, and its result when finished."""
        cfg = load(config)

        async def go() -> dict[str, Any]:
            client = await connect(cfg)
            handle = await _handle(client, cfg, workflow_id)
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
            return {"workflow_id": workflow_id, "run_id": desc.run_id, "status": desc.status.name if desc.status else "?",
                    "operation": attrs.get(sa.OPERATION), "phase": attrs.get(sa.PHASE),
                    "progress": prog.model_dump(mode="json") if prog else None, "result": result,
                    "ui_link": ui_link(cfg, workflow_id, desc.run_id)}

        info = run_async(go)
        if output is Output.json:
            print_json(info)
            return
        prog = OperationProgress.model_validate(info["progress"]) if info["progress"] else None
        console.print(progress_table(workflow_id, prog, info["status"]))
        if info["result"] is not None:
            console.print_json(data=info["result"])
        console.print(f"UI: {info['ui_link']}")

    @ops_app.command("approve")
    def approve(
        workflow_id: Annotated[str, typer.Argument(help="Workflow id waiting at its approval gate.")],
        config: ConfigOpt = Path(DEFAULT_CONFIG),
        approver: Annotated[str, typer.Option(help="Your name, recorded in the result.", envvar="USER")] = "operator",
        comment: Annotated[str, typer.Option(help="Why.")] = "",
    ) -> None:
        """Approve an operation waiting at its approval gate (rejected if it is not waiting)."""
        cfg = load(config)
        msg = run_async(lambda: _update(cfg, workflow_id, UPDATE_APPROVE, ApproveInput(approver=approver, comment=comment)))
        console.print(msg)

    @ops_app.command("abort")
    def abort(
        workflow_id: Annotated[str, typer.Argument(help="Workflow id to abort.")],
        config: ConfigOpt = Path(DEFAULT_CONFIG),
        reason: Annotated[str, typer.Option(help="Why, recorded in the result.")] = "aborted by operator",
    ) -> None:
        """Ask an operation to stop at its next safe point (rejected once it is past no-return)."""
        cfg = load(config)
        msg = run_async(lambda: _update(cfg, workflow_id, UPDATE_ABORT, AbortInput(reason=reason)))
        console.print(msg)


async def _update(cfg: FleetConfig, wid: str, name: str, arg: Any) -> str:
    from temporalio.client import WorkflowUpdateFailedError

    client = await connect(cfg)
    handle = await _handle(client, cfg, wid)
    try:
        return str(await handle.execute_update(name, arg, result_type=str))
    except WorkflowUpdateFailedError as exc:
        raise UserError(f"{name} rejected by {wid}: {exc.cause or exc}") from None
    except RPCError as exc:
        raise UserError(f"{name} failed for {wid}: {exc.message}") from None



