"""Drill-boundary fixtures: a stand-in region admin API that records every fault call it gets.

A hostile experiment must not reach it; `Recorder.hits` says whether one did.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fleetcfg import fleet_config_data
from tests.helpers import free_port

REPO = Path(__file__).resolve().parents[2]
OUTAGE = json.loads((REPO / "experiments" / "region-outage.json").read_text())


class Recorder(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        Recorder.hits.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b'{"affected": ["would-have-been-hurt"]}')

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def admin_recorder() -> Iterator[str]:
    """Stands where the region admin API would be, and records every fault call it receives."""
    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    server.shutdown()


def drill_config(
    directory: Path, admin: str, allowed: list[str], injector: str = "devstack", temporal: str | None = None
) -> Path:
    """A test fleet config whose regions' admin API is `admin`, with these drill targets and injector."""
    data = fleet_config_data()
    for r in data["regions"]:
        r["devstack_admin_url"] = admin
    if temporal:
        data["temporal"]["address"] = temporal
    data["drills"] = {"allowed_targets": allowed, "fault_injector": injector}
    path = directory / f"fleet-{'-'.join(allowed) or 'none'}-{injector}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
