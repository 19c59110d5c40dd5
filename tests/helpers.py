"""Test helpers shared by every test module: free ports, polling, running drctl, writing a config.

The generated two-region test fleet itself is tests/fleetcfg.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import random
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

if TYPE_CHECKING:
    from temporalio.testing import WorkflowEnvironment

    from drctl.config.schema import FleetConfig

T = TypeVar("T")
# The installed console script, as a user runs it (PYTHONPATH, inherited, picks the tree under test).
DRCTL = Path(sys.executable).parent / "drctl"


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


def free_port_run(n: int, attempts: int = 20) -> int:
    """A first port P with P..P+n-1 all free on 127.0.1.1 (the bench's first target address)."""
    ports = _port_slice()
    if len(ports) < 2 * n:
        ports = range(10000, 32768)
    # Candidate runs n apart from a random start: consecutive bases would all overlap one taken port.
    start = random.randrange(len(ports) - n)
    for i in range(attempts):
        base = ports[0] + (start + i * n) % (len(ports) - n)
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.1.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no run of {n} free ports on 127.0.1.1 in {attempts} attempts")


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


async def until(
    check: Callable[[], object], what: str, timeout_s: float = 60.0, interval_s: float = 0.1
) -> None:
    """`assert_eventually` for a blocking check (a provider call): run off the event loop."""

    async def off_loop() -> object:
        return await asyncio.to_thread(check)

    await assert_eventually(off_loop, timeout_s=timeout_s, interval_s=interval_s, what=what)


# --- drctl command lines ---------------------------------------------------------------------------
# In-process (`run_cli`, `cli`) for suites that run many command lines: a process each would take
# minutes on a loaded machine. As a subprocess (`drctl`, `drctl_async`) where the real binary, its
# exit and its environment are what the test is about.


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `drctl <argv>` in this process: the binary's entry point minus
    os._exit. An unexpected exception propagates: a traceback."""
    from drctl.cli.main import invoke

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = invoke(argv)
    return code, out.getvalue(), err.getvalue()


async def cli(*argv: str) -> tuple[int, str, str]:
    """`run_cli` from an async test, off the event loop that runs the test's in-process workers.

    The command's own asyncio.run needs a thread without a running loop; one command at a time, since
    stdout redirection is process-wide.
    """
    return await asyncio.to_thread(run_cli, list(argv))


def _cli_env(env: dict[str, str] | None) -> dict[str, str]:
    # Wide and plain: rich keeps whole table cells and long paths on one line, with no colour codes.
    return {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **(env or {})}


def drctl(
    *args: str, input_text: str | None = None, timeout_s: float = 240, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI as a user would; stdin is not a TTY unless input is given through it."""
    return subprocess.run(
        [str(DRCTL), *args],
        capture_output=True,
        text=True,
        input=input_text or "",
        timeout=timeout_s,
        env=_cli_env(env),
    )


async def drctl_async(*args: str, timeout_s: float = 240) -> tuple[int, str, str]:
    """`drctl` from an async test, so the in-process workers keep serving meanwhile."""
    proc = await asyncio.create_subprocess_exec(
        str(DRCTL), *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=_cli_env(None)
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout_s)
    return proc.returncode or 0, out.decode(), err.decode()


def write_config(cfg: FleetConfig, directory: Path) -> Path:
    """An in-memory config (fresh queues, short intervals) as a file in `directory`, for a CLI or
    worker subprocess; beside the session config, relative paths in it still resolve."""
    path = directory / f"fleet-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return path


async def local_temporal(**options: Any) -> WorkflowEnvironment:
    """A Temporal dev server of the caller's own (the venv's `temporal` binary, offline), with the
    pydantic converter; pass `search_attributes=ALL` for a namespace drctl can run on."""
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.testing import WorkflowEnvironment

    temporal = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal, data_converter=pydantic_data_converter, **options
    )
