"""A loopback HTTP server that answers every request with `{}` and counts it: where a hostile input's
fault or exfiltration would land, so a test can prove nothing was sent."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any


def counting_handler() -> type[BaseHTTPRequestHandler]:
    """A handler class of its own (its `hits` count is not shared with another test module's)."""

    class Trap(BaseHTTPRequestHandler):
        hits = 0

        def _any(self) -> None:
            type(self).hits += 1
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        do_GET = do_POST = do_PUT = do_DELETE = _any

        def log_message(self, *args: Any) -> None:
            pass

    return Trap
