"""A loopback TCP proxy that can be cut: the stand-in for a network partition between one worker
and one region (the worker's config points that region's gateway at the proxy).

Cut, it resets every new connection at once and drops the open ones (RST, as a firewall or a dead
route shows to the client); restored, it forwards again. Bounded: each forwarded read waits at
most `idle_s`, so a test never leaves a connection hanging.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from urllib.parse import urlsplit, urlunsplit

from tests.helpers import free_port


class CuttableProxy:
    def __init__(self, upstream_url: str, idle_s: float = 30.0) -> None:
        parts = urlsplit(upstream_url)
        self.upstream = parts
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.idle_s = idle_s
        self.listen_port = free_port()
        self.cut = False
        self.refused = 0  # connections reset while cut: evidence the cut was exercised
        self.answered = 0  # reads forwarded from the upstream: evidence the path was used before the cut
        self._open: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        """`upstream_url` with its host and port replaced by the proxy's."""
        return urlunsplit((self.upstream.scheme, f"127.0.0.1:{self.listen_port}", self.upstream.path,
                           self.upstream.query, self.upstream.fragment))

    async def __aenter__(self) -> CuttableProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.listen_port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.close()
        self._drop_open()
        if self._server is not None:
            await self._server.wait_closed()

    def set_cut(self, cut: bool) -> None:
        self.cut = cut
        if cut:
            self._drop_open()

    def _drop_open(self) -> None:
        for w in list(self._open):
            _reset(w)
        self._open.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut:
            self.refused += 1
            _reset(writer)
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), self.idle_s)
        except (OSError, TimeoutError):
            _reset(writer)
            return
        self._open |= {writer, up_writer}
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer, answers=True))
        finally:
            for w in (writer, up_writer):
                self._open.discard(w)
                if not w.is_closing():
                    w.close()

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, answers: bool = False) -> None:
        try:
            while not self.cut:
                data = await asyncio.wait_for(src.read(65536), self.idle_s)
                if not data:
                    break
                self.answered += answers
                dst.write(data)
                await dst.drain()
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            if self.cut:
                _reset(dst)
            elif not dst.is_closing():
                dst.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST (SO_LINGER 0): the peer sees 'connection reset', not a clean end of stream."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()
