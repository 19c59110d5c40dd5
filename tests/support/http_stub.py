"""The one HTTP stub server: a real threaded HTTP server on 127.0.0.1 that answers through a function.

Every stand-in the tests need (a webhook receiver, a region admin API, a gateway, a Route 53 proxy,
a Kubernetes API over TLS) is `StubServer(handle)` with its own `handle(request) -> Reply`, so the
server plumbing (binding, the serving thread, reading the body, writing the answer, shutdown) exists
once.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiohttp import web

from tests.support.ports import free_port


class _Server(ThreadingHTTPServer):
    # http.server listens with a backlog of 5. A burst of connects (40 requests redispatched by a
    # global HAProxy at once) while the serving thread waits for the GIL overflows it; the kernel
    # drops the SYNs and the client's 2 s connect timeout passes before the 3 s retransmit. Real
    # servers listen with a deep queue (uvicorn: 2048).
    request_queue_size = 1024


@dataclass
class Request:
    method: str
    path: str
    headers: Message  # as sent: each header's case kept, `get` ignores case
    body: bytes
    client_port: int

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # bytes as they are; anything else as JSON; None as an empty body
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # answer late, as a hung server does for a while
    content_type: str | None = "application/json"

    def payload(self) -> bytes:
        if self.body is None:
            return b""
        return self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()


Handle = Callable[[Request], Reply]


class StubServer:
    """`with StubServer(handle) as s:` serves `handle` at `s.url` until the block exits (or from
    `start()` until `close()`).

    `keep_alive` speaks HTTP/1.1, so a client that reuses connections shows as one source port for
    several requests. `tls` wraps the listening socket. A reply's delay waits on the stop event, so
    closing the server releases a request that hangs.
    """

    def __init__(
        self,
        handle: Handle,
        port: int = 0,
        keep_alive: bool = False,
        tls: ssl.SSLContext | None = None,
        name: str = "http-stub",
    ) -> None:
        self.handle = handle
        self.stop = threading.Event()
        self._server = _Server(("127.0.0.1", port), self._handler(keep_alive))
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.port = int(self._server.server_address[1])
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True
        )

    def start(self) -> StubServer:
        self._thread.start()
        return self

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, req: BaseHTTPRequestHandler) -> None:
        length = int(req.headers.get("Content-Length") or 0)
        request = Request(
            method=req.command,
            path=req.path,
            headers=req.headers,
            body=req.rfile.read(length) if length else b"",
            client_port=int(req.client_address[1]),
        )
        reply = self.handle(request)
        if reply.delay_s:
            self.stop.wait(reply.delay_s)
        data = reply.payload()
        try:
            req.send_response(reply.status)
            if reply.content_type and not any(k.lower() == "content-type" for k in reply.headers):
                req.send_header("Content-Type", reply.content_type)
            for k, v in reply.headers.items():
                req.send_header(k, v)
            req.send_header("Content-Length", str(len(data)))
            req.end_headers()
            req.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up on a late answer (its timeout is what the test is about).
            req.close_connection = True

    def _handler(self, keep_alive: bool) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                stub._answer(self)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET  # noqa: N815

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
                pass

        return Handler


async def serve_app(app: web.Application, port: int | None = None) -> tuple[web.AppRunner, str]:
    """An aiohttp stand-in (where the test needs aiohttp's streaming or its event loop) on 127.0.0.1,
    on a free port unless given: its runner, for the caller to clean up, and its URL."""
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    port = port or free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner, f"http://127.0.0.1:{port}"
