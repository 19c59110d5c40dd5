"""A scrape of /metrics never waits on a wedged Temporal past its budget.

The stand-in is a Temporal frontend that accepts connections and never answers (a hung server or a
black-holed load balancer): the reader's describe/query calls hang until their own timeout.
Prometheus would time the scrape out and mark every series of the worker stale, so the endpoint
must answer within its budget with the figures it has, and serve the read once it lands.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import Iterator

import pytest
from temporalio.client import Client

from drctl.config.schema import load_config
from drctl.worker.endpoint import WorkerHTTP
from tests.support.config import write_fleet_config


@pytest.fixture
def wedged_frontend() -> Iterator[str]:
    """A listening socket whose connections are accepted by the kernel and never read or answered."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield f"127.0.0.1:{s.getsockname()[1]}"


async def test_a_scrape_does_not_wait_for_a_hung_temporal_read(wedged_frontend: str) -> None:
    path = write_fleet_config()
    try:
        cfg = load_config(path)
        client = await Client.connect(wedged_frontend, lazy=True)
        http = WorkerHTTP(cfg, client, lambda: [])
        try:
            first = None
            for _ in range(2):
                resp = await http.route("GET", "/metrics")
                assert resp.status == 200
                # Figures that need no read are served: counters at 0, the configured objectives.
                assert (
                    f'drctl_rto_target_seconds{{fleet="{cfg.name}"}} {cfg.objectives.rto_target_s}'
                    in resp.text
                )
                assert f'drctl_failovers_total{{fleet="{cfg.name}",result="failed"}} 0.0' in resp.text
                reading = http._reading  # noqa: SLF001 - the background read this test is about
                assert reading is not None
                if first is None:
                    # Answered while the hung read still runs: the scrape did not wait for it.
                    assert not reading.done()
                    first = reading
                else:
                    # The second scrape finds that read still running and does not stack another.
                    assert reading is first or first.done()
            # The hung read is bounded by the reader's own timeout and then ends, logged, not leaked.
            await asyncio.wait_for(asyncio.shield(reading), 10)
        finally:
            await http.close()
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)
