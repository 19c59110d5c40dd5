"""Run the CLI in a network namespace of its own that reaches Temporal and nothing else.

`unshare -n` gives the command a network with only its own loopback: no Kubernetes API, gateway,
moto or Prometheus of the dev stack answers there. Temporal is carried in through a unix socket
(the filesystem is shared, the network is not): inside, a relay listens on Temporal's own address
and forwards each connection to the socket; outside, `temporal_bridge` forwards the socket to the
real server. The CLI's config keeps Temporal's address, so nothing else about it changes.

Run as `python -m tests.support.netns SOCKET HOST:PORT -- drctl ARGS...` inside `unshare -n`.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

CHUNK = 65536
REPO = Path(__file__).resolve().parents[2]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _splice(a: Streams, b_open: Awaitable[Streams]) -> None:
    """Copy both ways between connection `a` and the one `b_open` opens, until either side closes."""
    r1, w1 = a
    try:
        r2, w2 = await b_open
    except OSError:
        w1.close()
        return
    await asyncio.gather(_pipe(r1, w2), _pipe(r2, w1))


@contextlib.asynccontextmanager
async def temporal_bridge(socket_path: Path, address: str) -> AsyncIterator[None]:
    """Forward connections on the unix socket `socket_path` to Temporal at `address`, until exit."""
    host, port = address.rsplit(":", 1)

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _splice((r, w), asyncio.open_connection(host, int(port)))

    server = await asyncio.start_unix_server(handle, path=str(socket_path))
    try:
        yield
    finally:
        server.close()
        await server.wait_closed()


def unshared(socket_path: Path, address: str) -> list[str]:
    """The prefix that runs a command in a new network namespace reaching only Temporal (at `address`,
    through `socket_path`, which `temporal_bridge` serves): append the command to it."""
    unshare = shutil.which("unshare") or "unshare"
    inner = [sys.executable, "-m", "tests.support.netns", str(socket_path), address, "--"]
    script = f'cd "{REPO}" && ip link set lo up && exec "$@"'
    return [unshare, "-n", "sh", "-c", script, "sh", *inner]


def _relay(socket_path: str, address: str, ready: threading.Event) -> None:
    host, port = address.rsplit(":", 1)

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await _splice((r, w), asyncio.open_unix_connection(socket_path))

    async def serve() -> None:
        server = await asyncio.start_server(handle, host, int(port))
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


def main() -> int:
    socket_path, address, sep, *argv = sys.argv[1:]
    assert sep == "--" and argv, "usage: netns SOCKET HOST:PORT -- COMMAND..."
    ready = threading.Event()
    threading.Thread(target=_relay, args=(socket_path, address, ready), daemon=True).start()
    if not ready.wait(10):
        print("netns relay did not start", file=sys.stderr)
        return 99
    return subprocess.run(argv, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
