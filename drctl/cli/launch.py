"""Start an operation, show its Temporal UI link, then watch it or return (`--no-wait`).

Every command that starts a workflow goes through `launch`; `drctl ops watch` re-attaches with the
same `watch`, so progress, result and exit code look the same however the operation is followed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Generic

import typer
from rich.live import Live
from rich.table import Table
from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.service import RPCError

from drctl.cli.common import Output, UserError, console, err_console, print_json, run_async
from drctl.cli.errors import EXIT_FAILED, EXIT_NOT_STARTED, EXIT_OK
from drctl.client.connection import connect, ui_link
from drctl.client.outcome import Finished, M, finished
from drctl.config.schema import FleetConfig
from drctl.models import search_attributes as sa
from drctl.models.phases import QUERY_PROGRESS, OperationProgress

NoWait = Annotated[
    bool,
    typer.Option(
        "--no-wait",
        help="Start and return; follow it with `drctl ops watch ID`, `drctl ops show ID` or in the UI.",
    ),
]

Starter = Callable[[Client], Awaitable[WorkflowHandle[Any, Any]]]


@dataclass
class Launched(Generic[M]):
    """A started operation: its workflow id, UI link, and result (None with --no-wait)."""

    workflow_id: str
    link: str
    done: Finished[M] | None


async def start_unless_running(
    client: Client, cfg: FleetConfig, run: Any, arg: Any, *, wid: str, operation: str, phase: str
) -> tuple[WorkflowHandle[Any, Any], bool]:
    """Start the fleet's long-running workflow `wid` (`run` is its run method) unless it runs;
    returns (handle, started). Started in `phase`, the one it stays in while it runs."""
    try:
        desc = await client.get_workflow_handle(wid).describe()
        if desc.status and desc.status.name == "RUNNING":
            return client.get_workflow_handle(wid), False
    except RPCError:
        pass
    attrs = TypedSearchAttributes(
        [
            SearchAttributePair(sa.FLEET, cfg.name),
            SearchAttributePair(sa.OPERATION, operation),
            SearchAttributePair(sa.PHASE, phase),
            SearchAttributePair(sa.INITIATOR, client.identity),
        ]
    )
    handle = await client.start_workflow(
        run,
        arg,
        id=wid,
        task_queue=cfg.temporal.task_queue,
        search_attributes=attrs,
        memo={"fleet": cfg.name, "initiator": client.identity},
        static_summary=f"{operation} of fleet {cfg.name}, started by {client.identity}",
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    return handle, True


def stop_workflow(
    cfg: FleetConfig, wid: str, stop: Callable[[WorkflowHandle[Any, Any]], Awaitable[None]], exit_code: int
) -> None:
    """Signal or cancel the long-running workflow `wid`; one that is not running is a UserError."""

    async def go() -> None:
        try:
            await stop((await connect(cfg)).get_workflow_handle(wid))
        except RPCError as exc:
            raise UserError(f"{wid} is not running ({exc.message})", exit_code) from None

    run_async(go)


def exit_code(done: Finished[Any]) -> int:
    """The same for every command: 0 succeeded, 1 ran and did not succeed, 3 the fleet was busy."""
    return EXIT_NOT_STARTED if done.busy else (EXIT_FAILED if done.failed else EXIT_OK)


def progress_table(wid: str, p: OperationProgress | None, status: str) -> Table:
    t = Table(title=f"{wid}: {status}" + (f", phase {p.phase}" if p else ""), expand=False)
    t.add_column("phase")
    t.add_column("seconds", justify="right")
    for ph in p.phases if p else []:
        t.add_row(ph.phase, "…" if ph.duration_s is None else f"{ph.duration_s:.2f}")
    if p and p.awaiting_approval:
        t.caption = f"waiting for approval: drctl ops approve {wid}"
    elif p and p.details:
        t.caption = p.details
    return t


async def query_progress(handle: WorkflowHandle[Any, Any]) -> OperationProgress | None:
    try:
        return await handle.query(QUERY_PROGRESS, result_type=OperationProgress)
    except (RPCError, WorkflowQueryFailedError):
        return None  # not yet picked up by a worker, or no such query on this workflow type


async def watch(
    handle: WorkflowHandle[Any, Any], result_type: type[M], show: bool = True, poll_s: float = 0.5
) -> Finished[M]:
    """Wait for the operation to close, showing the phases live (when `show`).

    An operation that did not succeed ends Failed; its result comes from the failure's details.
    """
    result_task = asyncio.ensure_future(finished(handle, result_type))
    if not show:
        return await result_task
    with Live(
        progress_table(handle.id, None, "starting"), console=console, refresh_per_second=4, transient=False
    ) as live:
        while not result_task.done():
            live.update(progress_table(handle.id, await query_progress(handle), "running"))
            await asyncio.wait([result_task], timeout=poll_s)
        done = result_task.result() if result_task.exception() is None else None
        status = "finished" if done is None else ("failed" if done.failed else "completed")
        live.update(progress_table(handle.id, await query_progress(handle), status))
    return result_task.result()


@contextmanager
def reattach_hint(workflow_ids: list[str]) -> Iterator[None]:
    """On Ctrl-C, say how to follow the operation again: Ctrl-C stops watching, not the operation."""
    try:
        yield
    except KeyboardInterrupt:
        for wid in workflow_ids:
            err_console.print(
                f"{wid} keeps running; follow it again with `drctl ops watch {wid}`",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        raise


def launch(
    cfg: FleetConfig,
    what: str,
    start: Starter,
    result_type: type[M],
    *,
    no_wait: bool,
    output: Output,
    live: bool = True,
) -> Launched[M]:
    """Start an operation with `start(client)`, print its UI link on stderr, then watch it or return.

    With `--no-wait -o json` stdout gets the workflow id, run id and link, for a script to follow.
    `live=False` waits without the phase table, for a workflow that has no phases to show.
    """
    started: list[str] = []

    async def go() -> Launched[M]:
        handle = await start(await connect(cfg))
        started.append(handle.id)
        link = ui_link(cfg, handle.id, handle.result_run_id)
        # stderr: stdout stays clean for `-o json`
        err_console.print(
            f"{what} started: {handle.id}\nUI: {link}", markup=False, highlight=False, soft_wrap=True
        )
        if no_wait:
            if output is Output.json:
                print_json({"workflow_id": handle.id, "run_id": handle.result_run_id, "ui_link": link})
            return Launched(handle.id, link, None)
        return Launched(
            handle.id, link, await watch(handle, result_type, show=live and output is Output.table)
        )

    with reattach_hint(started):
        return run_async(go)


def result_only(launched: Launched[Any]) -> Any:
    """`-o json` as the bare result, for commands whose JSON has always been the result itself."""
    return launched.done.result.model_dump(mode="json") if launched.done else None


def conclude(
    launched: Launched[M],
    output: Output,
    render: Callable[[M, str], None],
    as_json: Callable[[Launched[M]], Any] | None = None,
) -> None:
    """Render a watched operation's result (table or JSON) and exit with its code; nothing after --no-wait."""
    done = launched.done
    if done is None:
        return
    if output is Output.json:
        print_json(
            as_json(launched)
            if as_json
            else {
                "workflow_id": launched.workflow_id,
                "ui_link": launched.link,
                "result": done.result.model_dump(mode="json"),
            }
        )
    else:
        render(done.result, launched.link)
    raise typer.Exit(exit_code(done))
