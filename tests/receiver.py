"""A local webhook receiver: a real HTTP server on 127.0.0.1 that records every POST.

`script` is the answer to each request in order, as (status, delay_s); once used up, it answers
200 at once. A delay longer than the client's timeout makes a receiver that hangs.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: Any
    status: int
    at: float


@dataclass
class Receiver:
    url: str
    script: list[tuple[int, float]] = field(default_factory=list)
    posts: list[Received] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self, path: str | None = None) -> list[Any]:
        with self.lock:
            return [p.body for p in self.posts if path is None or p.path == path]


@contextmanager
def receiver(script: list[tuple[int, float]] | None = None) -> Iterator[Receiver]:
    rec = Receiver(url="", script=list(script or []))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with rec.lock:
                status, delay = rec.script.pop(0) if rec.script else (200, 0.0)
                rec.posts.append(
                    Received(
                        self.path, dict(self.headers), json.loads(raw or b"null"), status, time.monotonic()
                    )
                )
            # Wait on the stop event, not sleep: closing the receiver releases a hanging request.
            rec.stop.wait(delay)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"status":"success"}' if status < 300 else b'{"status":"error"}')

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's signature
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    rec.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield rec
    finally:
        rec.stop.set()
        server.shutdown()
        server.server_close()


def closed_port_url() -> str:
    """A URL on which nothing listens (the port was bound once, then released)."""
    from tests.helpers import free_port

    return f"http://127.0.0.1:{free_port()}"
