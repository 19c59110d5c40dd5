"""The worker's link to Temporal: connect with backoff, and know how long it has been down.

A worker that cannot reach Temporal at start waits for it instead of exiting: in Kubernetes an exit
is a crash loop whose back-off (up to 5 min) outlasts the outage, and the region's queue then has no
poller when Temporal returns. Each attempt is bounded (`ATTEMPT_TIMEOUT_S`); the waits between
attempts double from `FIRST_WAIT_S` up to `MAX_WAIT_S`, with jitter so a fleet of workers restarted
together does not reconnect in step; attempts go on until Temporal answers or the worker is stopped.
A configuration error (a TLS file or key that cannot be read, a bad identity) is not an outage: it
is raised at once, and the CLI exits 2 naming it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from temporalio.client import Client

from drctl.client.connection import TemporalUnreachable

log = logging.getLogger("drctl.worker")

FIRST_WAIT_S = 0.5
MAX_WAIT_S = 10.0  # short enough that a worker is back within seconds of Temporal's return
ATTEMPT_TIMEOUT_S = 10.0  # a frontend that accepts and never answers must not hold the loop


@dataclass
class TemporalLink:
    """Whether the worker reaches Temporal, and since when it has not (monotonic clock)."""

    address: str
    down_since: float | None = field(default_factory=time.monotonic)
    error: str = "not connected yet"

    def down(self, error: str) -> None:
        if self.down_since is None:
            self.down_since = time.monotonic()
        self.error = error

    def up(self) -> None:
        self.down_since = None
        self.error = ""

    def disconnected_s(self) -> float:
        return 0.0 if self.down_since is None else time.monotonic() - self.down_since


def wait_s(attempt: int, rng: random.Random) -> float:
    """The wait after failed attempt number `attempt` (0-based): exponential, capped, half of it jitter."""
    ceiling = min(MAX_WAIT_S, FIRST_WAIT_S * 2**attempt)
    return ceiling / 2 + rng.uniform(0, ceiling / 2)


async def connect_with_backoff(
    connect_once: Callable[[], Awaitable[Client]],
    link: TemporalLink,
    stop: asyncio.Event,
    rng: random.Random | None = None,
) -> Client | None:
    """Connect, retrying unreachable Temporal until it answers; None when `stop` is set first.

    Raises whatever `connect_once` raises other than TemporalUnreachable (configuration errors).
    """
    rng = rng or random.Random()  # noqa: S311 - jitter, not a secret
    attempt = 0
    while not stop.is_set():
        try:
            client = await asyncio.wait_for(connect_once(), ATTEMPT_TIMEOUT_S)
        except (TemporalUnreachable, TimeoutError) as exc:
            why = (
                str(exc)
                if isinstance(exc, TemporalUnreachable)
                else f"no answer within {ATTEMPT_TIMEOUT_S:g}s"
            )
            link.down(why)
            pause = wait_s(attempt, rng)
            log.warning(
                "Temporal at %s unreachable for %.0fs (attempt %d): %s; retrying in %.1fs",
                link.address,
                link.disconnected_s(),
                attempt + 1,
                why,
                pause,
            )
            attempt += 1
            try:
                await asyncio.wait_for(stop.wait(), pause)
            except TimeoutError:
                pass
            continue
        link.up()
        if attempt:
            log.info("connected to Temporal at %s after %d failed attempts", link.address, attempt)
        return client
    return None
