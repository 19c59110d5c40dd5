"""Polling instead of sleeping: wait until a check holds, or fail with the last value it saw."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def _given_up(deadline: float, timeout_s: float, what: object, last: object) -> AssertionError | None:
    """The failure to raise once the deadline has passed: it names the last value or error seen."""
    if time.monotonic() <= deadline:
        return None
    return AssertionError(f"timed out after {timeout_s}s waiting for {what}: last={last!r}")


def wait_until(check: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.1, what: str = "") -> T:
    """Poll a sync check until it returns a truthy value; fail with the last value or error."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while True:
        try:
            if last := check():
                return last  # type: ignore[return-value]
        except AssertionError as exc:
            last = exc
        if failure := _given_up(deadline, timeout_s, what or check, last):
            raise failure
        time.sleep(interval_s)


async def assert_eventually(
    check: Callable[[], Awaitable[T]], timeout_s: float = 10.0, interval_s: float = 0.1, what: str = ""
) -> T:
    """Async version of wait_until: the check is awaited; AssertionError counts as 'not yet'."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while True:
        try:
            last = await check()
        except AssertionError as exc:
            last = exc
        else:
            if last:
                return last  # type: ignore[return-value]
        if failure := _given_up(deadline, timeout_s, what or check, last):
            raise failure
        await asyncio.sleep(interval_s)


async def until(
    check: Callable[[], object], what: str, timeout_s: float = 60.0, interval_s: float = 0.1
) -> None:
    """`assert_eventually` for a blocking check (a provider call): run off the event loop."""

    async def off_loop() -> object:
        return await asyncio.to_thread(check)

    await assert_eventually(off_loop, timeout_s=timeout_s, interval_s=interval_s, what=what)
