"""Test helpers shared by every test module."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_slice() -> range:
    """This test process's share of the loopback ports below the kernel's ephemeral range.

    A test picks a port long before the server it names binds it (a config is written, then a
    stack comes up). A port from the ephemeral range can meanwhile become the local end of any
    outbound connection (CI saw a worker's HTTP port taken so). Ports below that range are
    never handed out by the kernel, and each xdist worker gets its own slice of them, so two
    test processes never pick the same port either.
    """
    low, high = 10000, _ephemeral_low()
    if high - low < 2000:
        return range(0)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    index = int(worker) if worker.isdigit() else 0
    size = (high - low) // max(count, index + 1)
    return range(low + index * size, low + (index + 1) * size)


_next_port: list[int] = []


def free_port() -> int:
    """A loopback TCP port that is free right now and that the kernel will not hand out on its own."""
    ports = _port_slice()
    if not _next_port:
        _next_port.append(random.randrange(len(ports)) if ports else 0)
    for _ in range(len(ports)):
        port = ports[_next_port[0] % len(ports)]
        _next_port[0] += 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
