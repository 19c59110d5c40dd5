"""Start an operation, show its Temporal UI link, then watch it or return (`--no-wait`).

Every command that starts a workflow goes through `launch`; `drctl ops watch` re-attaches with the
same `watch`, so progress, result and exit code look the same however the operation is followed.
On a terminal the phases show as a live table; without one (CI, a pipe) as one line per phase
change, so a log shows a long upgrade moving. `--timeout` stops waiting, never the operation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic

import typer
from rich.live import Live
from rich.table import Table
from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.service import RPCError

from drctl.cli.common import (
    Output,
    UserError,
    console,
    err_console,
    is_document,
    print_json,
    run_async,
)
from drctl.cli.errors import EXIT_FAILED, EXIT_NOT_STARTED, EXIT_OK, StillRunning
from drctl.client.connection import connect, ui_link
from drctl.client.outcome import Finished, M, finished
from drctl.config.schema import FleetConfig
from drctl.models import search_attributes as sa
from drctl.models.phases import QUERY_PROGRESS, OperationProgress
from drctl.models.safe_text import SUMMARY_CHARS, safe_text

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
        static_summary=safe_text(
            f"{operation} of fleet {cfg.name}, started by {client.identity}", limit=SUMMARY_CHARS
        ),
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
    t.add_column("phase", overflow="fold")
    t.add_column("seconds", justify="right", overflow="fold")
    for ph in p.phases if p else []:
        t.add_row(ph.phase, "…" if ph.duration_s is None else f"{ph.duration_s:.2f}")
    if p and p.awaiting_approval:
        t.caption = f"waiting for approval: drctl ops approve {wid}"
    elif p and p.details:
        t.caption = p.details
    return t


# A query waits for a worker to answer it; with none polling, the server holds it. Bounded, so a view
# of an operation nobody runs yet keeps refreshing (and a --timeout ends on time).
QUERY_TIMEOUT = timedelta(seconds=2)


async def query_progress(handle: WorkflowHandle[Any, Any]) -> OperationProgress | None:
    try:
        return await handle.query(QUERY_PROGRESS, result_type=OperationProgress, rpc_timeout=QUERY_TIMEOUT)
    except (RPCError, WorkflowQueryFailedError):
        return None  # not yet picked up by a worker, or no such query on this workflow type


def progress_line(wid: str, p: OperationProgress) -> str:
    """One log line per phase change: `12:03:04 failover/prod  phase=shift  <details>`."""
    line = f"{datetime.now():%H:%M:%S} {wid}  phase={p.phase}"
    if p.awaiting_approval:
        return f"{line}  waiting for approval: drctl ops approve {wid}"
    return f"{line}  {p.details}" if p.details else line


def _status(result_task: asyncio.Future[Any]) -> str:
    if not result_task.done() or result_task.cancelled():
        return "still running"  # the wait timed out, not the operation
    if result_task.exception() is not None:
        return "finished"
    return "failed" if result_task.result().failed else "completed"


async def _live_table(
    handle: WorkflowHandle[Any, Any], result_task: asyncio.Future[Any], poll_s: float
) -> None:
    with Live(
        progress_table(handle.id, None, "starting"), console=console, refresh_per_second=4, transient=False
    ) as live:
        while not result_task.done():
            live.update(progress_table(handle.id, await query_progress(handle), "running"))
            await asyncio.wait([result_task], timeout=poll_s)
        live.update(progress_table(handle.id, await query_progress(handle), _status(result_task)))


async def _log_lines(
    handle: WorkflowHandle[Any, Any], result_task: asyncio.Future[Any], poll_s: float
) -> None:
    last: tuple[str, str, bool] | None = None

    def log(p: OperationProgress | None) -> None:
        nonlocal last
        if p is not None and (p.phase, p.details, p.awaiting_approval) != last:
            last = (p.phase, p.details, p.awaiting_approval)
            console.print(progress_line(handle.id, p), markup=False, highlight=False, soft_wrap=True)
            console.file.flush()

    while not result_task.done():
        log(await query_progress(handle))
        await asyncio.wait([result_task], timeout=poll_s)
    log(await query_progress(handle))


async def watch(
    handle: WorkflowHandle[Any, Any],
    result_type: type[M],
    show: bool = True,
    poll_s: float = 0.5,
    timeout_s: float | None = None,
    link: str = "",
    follow: str = "watch",
) -> Finished[M]:
    """Wait for the operation to close, showing its phases (when `show`): a live table on a terminal,
    one line per phase change otherwise.

    An operation that did not succeed ends Failed; its result comes from the failure's details.
    After `timeout_s` it raises StillRunning (exit 4): the wait ends, the operation does not.
    """
    result_task = asyncio.ensure_future(finished(handle, result_type))
    shown = None
    if show:
        view = _live_table if console.is_terminal else _log_lines
        shown = asyncio.ensure_future(view(handle, result_task, poll_s))
    try:
        await asyncio.wait_for(asyncio.shield(result_task), timeout_s)
    except (TimeoutError, asyncio.CancelledError) as exc:
        # --timeout, or Ctrl-C: stop watching at once, not after a progress query nobody answers.
        # This cancels our long poll and view only; the workflow is not touched.
        result_task.cancel()
        if shown is not None:
            shown.cancel()
        if isinstance(exc, TimeoutError):
            raise StillRunning(handle.id, link, timeout_s or 0.0, follow) from None
        raise
    finally:
        if shown is not None:
            # Otherwise the result is in (or it raised): the view shows the last state and ends.
            await asyncio.gather(shown, return_exceptions=True)
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
    timeout_s: float | None = None,
) -> Launched[M]:
    """Start an operation with `start(client)`, print its UI link on stderr, then watch it or return.

    With `--no-wait -o json|yaml` stdout gets the workflow id, run id and link, for a script to follow.
    `live=False` waits without the phase view, for a workflow that has no phases to show.
    `timeout_s` bounds the wait (StillRunning, exit 4), not the operation.
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
            if is_document(output):
                print_json(
                    {"workflow_id": handle.id, "run_id": handle.result_run_id, "ui_link": link}, output
                )
            return Launched(handle.id, link, None)
        shown = live and not is_document(output)
        # `ops watch` follows operations with phases; anything else (notify test) `ops show` shows.
        follow = "watch" if live else "show"
        done = await watch(handle, result_type, show=shown, timeout_s=timeout_s, link=link, follow=follow)
        return Launched(handle.id, link, done)

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
    if is_document(output):
        print_json(
            as_json(launched)
            if as_json
            else {
                "workflow_id": launched.workflow_id,
                "ui_link": launched.link,
                "result": done.result.model_dump(mode="json"),
            },
            output,
        )
    else:
        render(done.result, launched.link)
    raise typer.Exit(exit_code(done))
