"""`drctl notify test`: send a test event through the worker, the way real events travel.

It runs the `Notify` workflow on the fleet's task queue, so the worker's environment supplies the
URLs and keys: a test from a laptop that lacks the secrets still proves the production path.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from drctl.cli import common

if TYPE_CHECKING:  # loaded when the command runs, not for -h or Tab completion
    from drctl.cli.launch import Launched
    from drctl.models.notify import NotifyResult

# A test should answer in seconds, not wait out a production retry budget.
_TEST_RETRY_FOR_S = 20.0


app = typer.Typer(
    name="notify", help="Webhook notifications (notifications.webhooks in the config).", no_args_is_help=True
)


@app.command("test")
def test_cmd(
    webhook: Annotated[
        list[str] | None,
        typer.Option("--webhook", "-w", help="Webhook name (repeatable); default every configured webhook."),
    ] = None,
    config: common.ConfigOpt = common.CONFIG,
    no_wait: common.NoWait = False,
    timeout: common.Timeout = None,
    output: common.OutputOpt = common.TABLE,
) -> None:
    """Send a test event to webhooks through the worker; exit 1 if any was not delivered."""
    from drctl.cli.launch import conclude, launch, result_only
    from drctl.client.identity import identity
    from drctl.models.notify import NotifyInput, NotifyResult, WebhookSpec, ping_event

    cfg = common.load(config)
    hooks = cfg.notifications.webhooks
    if not hooks:
        common.fail(f"{cfg.source_path or config}: notifications.webhooks is empty; nothing to test")
    known = [w.name for w in hooks]
    unknown = [n for n in webhook or [] if n not in known]
    if unknown:
        common.fail(f"unknown webhook {', '.join(unknown)}; configured: {', '.join(known)}")
    chosen = [w for w in hooks if not webhook or w.name in webhook]
    specs = [
        WebhookSpec.from_config(w).model_copy(update={"retry_for_s": min(w.retry_for_s, _TEST_RETRY_FOR_S)})
        for w in chosen
    ]
    wid = f"notify/{cfg.name}/notify.test/{uuid.uuid4().hex[:12]}"
    event = ping_event(cfg.name, wid, datetime.now(UTC), by=f"{identity(cfg)} via drctl notify test")

    inp = NotifyInput(event=event, webhooks=specs)
    # A webhook that did not take the event ends the workflow Failed, its result in the details.
    launched: Launched[NotifyResult] = launch(
        cfg,
        "notify test",
        lambda client: client.start_workflow(
            "Notify", inp, id=wid, task_queue=cfg.temporal.task_queue, result_type=NotifyResult
        ),
        NotifyResult,
        no_wait=no_wait,
        output=output,
        live=False,
        timeout_s=timeout,
    )
    conclude(launched, output, _render, result_only)


def _render(res: NotifyResult, link: str) -> None:
    for name in res.delivered:
        common.console.print(f"[green]delivered[/green] {name}")
    for name, why in res.failed.items():
        common.console.print(f"[red]failed[/red]    {name}: {why}", highlight=False, soft_wrap=True)
