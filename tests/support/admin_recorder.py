"""Drill-boundary fixtures: a stand-in region admin API that records every fault call it gets.

A hostile experiment must not reach it; `Recorder.hits` says whether one did.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.http_stub import Reply, Request, StubServer
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
OUTAGE = json.loads((REPO / "experiments" / "region-outage.json").read_text())


class Recorder:
    hits: list[str] = []

    @staticmethod
    def handle(req: Request) -> Reply:
        Recorder.hits.append(req.path)
        return Reply(200, b'{"affected": ["would-have-been-hurt"]}', content_type=None)


@pytest.fixture(scope="module")
def admin_recorder() -> Iterator[str]:
    """Stands where the region admin API would be, and records every fault call it receives."""
    with StubServer(Recorder.handle, port=free_port()) as server:
        yield server.url
