"""An in-process HTTP stand-in for the dev stack's region admin API and the global endpoint.

It answers as they do (JSON bodies, `affected` lists, the region header on completions) and records
every request, so the chaos actions and probes run their real HTTP code without a dev stack.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # answer late, as a hung server does for a while


@dataclass
class StandIn:
    url: str
    calls: list[tuple[str, str, Any, dict[str, str]]] = field(default_factory=list)
    replies: dict[str, Reply] = field(default_factory=dict)
    # Completions answer from this script in order, then repeat its last entry.
    completions: list[Reply] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)  # the client's source port, per request

    def reset(self) -> None:
        self.ports.clear()
        self.calls.clear()
        self.replies.clear()
        self.completions.clear()

    def answer(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Reply:
        self.calls.append((method, path, body, headers))
        if path.endswith("/v1/completions"):
            if not self.completions:
                return Reply(500)
            return self.completions.pop(0) if len(self.completions) > 1 else self.completions[0]
        return self.replies.get(f"{method} {path}", Reply(200, {}))


def serve() -> Iterator[StandIn]:
    """Run a stand-in on a free loopback port for as long as the generator is open."""
    holder: dict[str, StandIn] = {}

    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1 keeps a connection open when the client asks, as real servers do, so a client
        # that reuses connections shows up as one source port for several requests.
        protocol_version = "HTTP/1.1"

        def _handle(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            headers = {k.lower(): v for k, v in self.headers.items()}
            holder["s"].ports.append(self.client_address[1])
            reply = holder["s"].answer(method, self.path, body, headers)
            if reply.delay_s:
                time.sleep(reply.delay_s)
            data = b"" if reply.body is None else json.dumps(reply.body).encode()
            self.send_response(reply.status)
            for k, v in reply.headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            try:
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                # The client gave up on a late answer (its timeout is what the test is about).
                self.close_connection = True

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self._handle("GET")

        def do_POST(self) -> None:  # noqa: N802
            self._handle("POST")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder["s"] = StandIn(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder["s"]
    finally:
        server.shutdown()
        server.server_close()
