"""The codec server's HTTP transport: aiohttp's server on a socket bound at once, capped in connections.

aiohttp parses HTTP strictly (a malformed request line, header or `Content-Length` is a 400 from
its parser, never a traceback) and bounds the request line and headers. On top of it:
- the socket listens as soon as the server object exists, with a deep accept queue (`BACKLOG`): a
  Temporal UI opening a namespace's histories sends a burst of decodes, and connects past a
  shallow queue wait for SYN retransmits;
- at most `MAX_CONNECTIONS` connections are served at once, counted when they are accepted, before
  any byte is read or any token checked: one more gets a 503 and is closed at once, so a flood of
  unauthenticated connections costs a file descriptor each for an instant, not a handler each;
- a connection that has not completed a request within `IDLE_TIMEOUT_S` of opening (or of its
  last answer) is closed, so a client sending its headers a byte at a time does not keep its slot.

The interface is http.server's (`server_address`, `serve_forever`, `shutdown`, `server_close`), so
the CLI runs it in the foreground and tests run it on a thread.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Awaitable, Callable
from typing import Any, cast

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

BACKLOG = 2048  # uvicorn's default depth
MAX_CONNECTIONS = 64  # the UI decodes a page with a handful of parallel requests
IDLE_TIMEOUT_S = 30.0
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class _OneLineErrors(logging.Filter):
    """aiohttp logs a refused request with its traceback; one line naming the error is enough."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            first = (str(record.exc_info[1]).strip().splitlines() or [""])[0]
            record.msg = f"{record.msg}: {type(record.exc_info[1]).__name__}: {first}"
            record.exc_info = None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def one_line_log(name: str) -> logging.Logger:
    """A logger for aiohttp's server whose refused requests are logged in one line, at INFO."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, _OneLineErrors) for f in logger.filters):
        logger.addFilter(_OneLineErrors())
    return logger


_LOG = one_line_log("drctl.codec_server.http")


class _Handler(RequestHandler):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        server = self._manager
        if isinstance(server, _CappedServer) and len(server.connections) >= server.cap:
            # Refused as accepted: no request task, no parser work, nothing read.
            server.refused += 1
            cast(asyncio.Transport, transport).write(_BUSY)
            transport.close()
            return
        super().connection_made(transport)

    def eof_received(self) -> bool:  # type: ignore[override]  # asyncio reads the bool: keep open
        # A client that half-closes after its request still gets the answer, then the close; with
        # nothing pending, returning False lets asyncio close the transport.
        if self._waiter is not None and not self._messages:
            return False  # idle, waiting for a request that cannot come now
        self.close()
        return True


class _CappedServer(web.Server):
    """aiohttp's low-level server whose connections past `cap` are refused as they are accepted."""

    def __init__(
        self, handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]], cap: int, **kw: Any
    ):
        super().__init__(handler, **kw)
        self.cap = cap
        self.refused = 0

    def __call__(self) -> RequestHandler:
        return _Handler(self, loop=self._loop, **self._kwargs)


class CodecHTTPServer:
    """Serves `handler` on host:port; listening from construction, serving from `serve_forever`."""

    def __init__(
        self,
        handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
        host: str,
        port: int,
        max_connections: int = MAX_CONNECTIONS,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
    ) -> None:
        self._handle = handler
        self.max_connections = max_connections
        self.idle_timeout_s = idle_timeout_s
        self._sock = socket.create_server((host, port), backlog=BACKLOG)
        self.server_address: tuple[str, int] = self._sock.getsockname()[:2]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stopped = threading.Event()
        self.server: _CappedServer | None = None

    def serve_forever(self) -> None:
        """Serve until `shutdown` (from another thread) or KeyboardInterrupt."""
        self._stopped.clear()
        try:
            asyncio.run(self._serve())
        finally:
            self._stopped.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.server = _CappedServer(
            self._handle,
            self.max_connections,
            keepalive_timeout=self.idle_timeout_s,
            max_line_size=8190,
            max_field_size=8190,
            max_headers=64,
            lingering_time=0,  # a refused body is not read: the connection closes after the answer
            logger=_LOG,
            access_log=None,
        )
        runner = web.ServerRunner(self.server, handle_signals=False)
        await runner.setup()
        site = web.SockSite(runner, self._sock, backlog=BACKLOG, shutdown_timeout=5.0)
        await site.start()
        try:
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def shutdown(self) -> None:
        """Stop `serve_forever` and wait for it (call from another thread)."""
        loop, stop = self._loop, self._stop
        if loop is None or stop is None:
            return
        try:
            loop.call_soon_threadsafe(stop.set)
        except RuntimeError:  # its loop has already ended
            return
        self._stopped.wait(30)

    def server_close(self) -> None:
        self._sock.close()
