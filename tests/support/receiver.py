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
from typing import Any

import pytest

from drctl.config.schema import FleetConfig, NotificationsConfig, WebhookConfig
from tests.support.http_stub import Reply, Request, StubServer
from tests.support.ports import free_port
from tests.support.wait import assert_eventually


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
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self, path: str | None = None) -> list[Any]:
        with self.lock:
            return [p.body for p in self.posts if path is None or p.path == path]

    async def posted(self, n: int = 1, timeout_s: float = 30.0, what: str = "") -> list[Any]:
        """The bodies received, once there are at least `n` (bounded: fails after `timeout_s`)."""

        async def enough() -> list[Any] | None:
            got = self.bodies()
            return got if len(got) >= n else None

        return await assert_eventually(enough, timeout_s=timeout_s, what=what or f"{n} post(s)")

    def handle(self, req: Request) -> Reply:
        with self.lock:
            status, delay = self.script.pop(0) if self.script else (200, 0.0)
            self.posts.append(
                Received(
                    req.path, dict(req.headers), json.loads(req.body or b"null"), status, time.monotonic()
                )
            )
        body = b'{"status":"success"}' if status < 300 else b'{"status":"error"}'
        return Reply(status, body, delay_s=delay)


@contextmanager
def receiver(script: list[tuple[int, float]] | None = None) -> Iterator[Receiver]:
    rec = Receiver(url="", script=list(script or []))
    with StubServer(rec.handle, name="receiver") as server:
        rec.url = server.url
        yield rec


def pagerduty_hook(monkeypatch: pytest.MonkeyPatch, url: str, routing_key: str) -> WebhookConfig:
    """A PagerDuty webhook to `url`, its routing key in the environment as production keeps it."""
    monkeypatch.setenv("DRCTL_TEST_PD_KEY", routing_key)
    return WebhookConfig(name="pager", format="pagerduty", url=url, routing_key_env="DRCTL_TEST_PD_KEY")


def with_hooks(cfg: FleetConfig, *hooks: WebhookConfig) -> FleetConfig:
    """`cfg` notifying `hooks`, and nothing else."""
    return cfg.model_copy(update={"notifications": NotificationsConfig(webhooks=list(hooks))})


def closed_port_url() -> str:
    """A URL on which nothing listens (the port was bound once, then released)."""
    return f"http://127.0.0.1:{free_port()}"
