"""The Failover's `verify_global`: drctl/providers/verify.py, heartbeating."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.defined import activity_methods
from drctl.config.schema import FleetConfig
from drctl.models.activity_io import VerifyInput, VerifyResult
from drctl.providers import verify
from drctl.providers.auth import AuthConfigError

_HEARTBEAT_S = 1.0


class VerifyActivities:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg

    @activity.defn(name="verify_global")
    async def verify_global(self, inp: VerifyInput) -> VerifyResult:
        """Send `requests` 1-token completions; count successes per serving region and errors."""

        async def alive(result: VerifyResult) -> None:
            # A worker that died mid-batch is noticed at the heartbeat timeout, not at the end of
            # start-to-close, so the retried attempt still fits in the verify deadline.
            while True:
                activity.heartbeat(result.ok + result.errors)
                await asyncio.sleep(_HEARTBEAT_S)

        try:
            return await verify.verify_global(self.cfg, inp, alive)
        except AuthConfigError as exc:
            raise ApplicationError(str(exc), type="AuthConfigError", non_retryable=True) from None


def build(cfg: FleetConfig) -> list[Callable[..., Any]]:
    return activity_methods(VerifyActivities(cfg))
