"""Test helpers shared by every test module."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A loopback TCP port that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(check: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.1, what: str = "") -> T:
    """Poll a sync check until it returns a truthy value; fail with the last value or error."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while True:
        try:
            last = check()
            if last:
                return last  # type: ignore[return-value]
        except AssertionError as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what or check}: last={last!r}")
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
            if last:
                return last  # type: ignore[return-value]
        except AssertionError as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what or check}: last={last!r}")
        await asyncio.sleep(interval_s)
