"""`drctl notify test`: send a test event through the worker, the way real events travel.

It runs the `Notify` workflow on the fleet's task queue, so the worker's environment supplies the
URLs and keys: a test from a laptop that lacks the secrets still proves the production path.
"""

from __future__ import annotations

import getpass
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from drctl.cli.common import (
    DEFAULT_CONFIG,
    ConfigOpt,
    Output,
    OutputOpt,
    console,
    err_console,
    fail,
    load,
    print_json,
    run_async,
)
from drctl.models.notify import NotifyInput, NotifyResult, WebhookSpec, ping_event
from drctl.temporal import connect, ui_link

# A test should answer in seconds, not wait out a production retry budget.
_TEST_RETRY_FOR_S = 20.0


app = typer.Typer(name="notify", help="Webhook notifications (notifications.webhooks in the config).",
                  no_args_is_help=True)


@app.command("test")
def test_cmd(
    webhook: Annotated[list[str] | None, typer.Option(
        "--webhook", "-w", help="Webhook name (repeatable); default every configured webhook.")] = None,
    config: ConfigOpt = Path(DEFAULT_CONFIG),
    output: OutputOpt = Output.table,
) -> None:
    """Send a test event to webhooks through the worker; exit 1 if any was not delivered."""
    cfg = load(config)
    hooks = cfg.notifications.webhooks
    if not hooks:
        fail(f"{cfg.source_path or config}: notifications.webhooks is empty; nothing to test")
    known = [w.name for w in hooks]
    unknown = [n for n in webhook or [] if n not in known]
    if unknown:
        fail(f"unknown webhook {', '.join(unknown)}; configured: {', '.join(known)}")
    chosen = [w for w in hooks if not webhook or w.name in webhook]
    specs = [WebhookSpec.from_config(w).model_copy(update={"retry_for_s": min(w.retry_for_s, _TEST_RETRY_FOR_S)})
             for w in chosen]
    wid = f"notify/{cfg.name}/notify.test/{uuid.uuid4().hex[:12]}"
    event = ping_event(cfg.name, wid, datetime.now(UTC), by=f"{getpass.getuser()} via drctl notify test")

    async def go() -> NotifyResult:
        client = await connect(cfg)
        handle = await client.start_workflow("Notify", NotifyInput(event=event, webhooks=specs), id=wid,
                                             task_queue=cfg.temporal.task_queue, result_type=NotifyResult)
        err_console.print(f"UI: {ui_link(cfg, wid, handle.result_run_id)}", highlight=False, soft_wrap=True)
        try:
            return await handle.result()
        except WorkflowFailureError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.details:
                return NotifyResult.model_validate(cause.details[0])
            raise

    res = run_async(go)
    if output is Output.json:
        print_json(res.model_dump(mode="json"))
    else:
        for name in res.delivered:
            console.print(f"[green]delivered[/green] {name}")
        for name, why in res.failed.items():
            console.print(f"[red]failed[/red]    {name}: {why}", highlight=False, soft_wrap=True)
    if res.failed:
        raise typer.Exit(1)
