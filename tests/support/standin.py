"""An in-process HTTP stand-in for the dev stack's region admin API and the global endpoint.

It answers as they do (JSON bodies, `affected` lists, the region header on completions) and records
every request, so the chaos actions and probes run their real HTTP code without a dev stack.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.support.http_stub import Reply, Request, StubServer

__all__ = ["Reply", "StandIn", "serve"]


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

    def handle(self, req: Request) -> Reply:
        self.ports.append(req.client_port)
        return self.answer(req.method, req.path, req.json(), {k.lower(): v for k, v in req.headers.items()})


def serve() -> Iterator[StandIn]:
    """Run a stand-in on a free loopback port for as long as the generator is open."""
    standin = StandIn(url="")
    # HTTP/1.1 keeps a connection open when the client asks, as real servers do, so a client that
    # reuses connections shows up as one source port for several requests.
    with StubServer(standin.handle, keep_alive=True) as server:
        standin.url = server.url
        yield standin
