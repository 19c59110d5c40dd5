"""Deliver one event to one webhook. The workflow's retry policy retries; the error table decides what.

The webhook's URL and secrets come from this worker's config and environment, looked up by the
name the workflow sent, so workflow input and history never hold them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.defined import activity_methods
from activities.errors import app_error
from drctl.client.connection import ui_link
from drctl.config.schema import FleetConfig
from drctl.models.notify import DeliverInput, Delivery
from drctl.providers import notify


class NotifyActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg

    @activity.defn(name="notify_webhook")
    async def notify_webhook(self, inp: DeliverInput) -> Delivery:
        try:
            hook = self.cfg.notifications.webhook(inp.webhook.name)
        except KeyError as exc:
            # The workflow's snapshot names a webhook this worker's config no longer has.
            raise ApplicationError(str(exc.args[0]), type="Invalid", non_retryable=True) from None
        ev = inp.event
        link = ui_link(self.cfg, ev.workflow_id, ev.run_id)
        try:
            code = await notify.send(hook, ev, link)
        except Exception as exc:  # noqa: BLE001 - mapped through the one error table
            raise app_error(exc) from None
        activity.logger.info("notified %s of %s (HTTP %s)", hook.name, ev.kind, code)
        return Delivery(webhook=hook.name, status_code=code)


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(NotifyActivities(cfg))
