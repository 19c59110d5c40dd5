"""/readyz on a namespace without drctl's search attributes: not ready, saying which and how to fix it.

A real Temporal dev server started without the attributes (the module's own: the session dev stack
registers them), a real worker on it, and then the registration an operator would run.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.testing import WorkflowEnvironment

from drctl.config.schema import FleetConfig
from drctl.models.search_attributes import ALL
from drctl.worker.process import run_worker
from tests.support.ports import free_port
from tests.support.temporal import start_local
from tests.support.wait import assert_eventually


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def bare_env() -> AsyncIterator[WorkflowEnvironment]:
    async with await start_local() as e:  # no search attributes registered
        yield e


@asynccontextmanager
async def _worker_on(cfg: FleetConfig, env: WorkflowEnvironment) -> AsyncIterator[httpx.AsyncClient]:
    """A real worker for `cfg` on `env`'s server, on fresh queues; yields a client for its endpoint."""
    tq = f"ready-{uuid.uuid4().hex[:8]}"
    cfg = cfg.model_copy(
        update={
            "temporal": cfg.temporal.model_copy(
                update={"address": env.client.service_client.config.target_host, "task_queue": tq}
            ),
            "regions": [r.model_copy(update={"task_queue": f"{tq}-{r.name}"}) for r in cfg.regions],
            "worker": cfg.worker.model_copy(update={"http_host": "127.0.0.1"}),
        }
    )
    port, stopping = free_port(), asyncio.Event()
    running = asyncio.create_task(run_worker(cfg, stop=stopping, http_port=port))
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        try:
            yield http
        finally:
            stopping.set()
            await asyncio.wait_for(running, 60)


async def _readyz(http: httpx.AsyncClient, status: int, saying: str) -> httpx.Response:
    """The /readyz answer once it has `status` and says `saying` (before that: starting up)."""
    try:
        answer = await http.get("/readyz")
    except httpx.TransportError as exc:
        raise AssertionError(f"not listening yet: {exc}") from None
    assert answer.status_code == status and saying in answer.text, answer.text
    return answer


async def test_a_namespace_without_the_attributes_is_not_ready_and_says_why(
    fleet_config: FleetConfig, bare_env: WorkflowEnvironment
) -> None:
    async with _worker_on(fleet_config, bare_env) as http:
        # Until its workers run it says so; then only the attributes keep it from being ready.
        lacks = "namespace default lacks drctl's search attributes"
        r = await assert_eventually(
            lambda: _readyz(http, 503, lacks), timeout_s=60, interval_s=0.2, what=lacks
        )
        assert all(f"{key.name} missing" in r.text for key in ALL), r.text
        assert "temporal operator search-attribute create --name DrctlFleet" in r.text
        scrape = (await http.get("/metrics")).text
        assert f'drctl_search_attributes_missing{{namespace="default"}} {float(len(ALL))}' in scrape

        await bare_env.client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace="default",
                search_attributes={k.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for k in ALL},
            )
        )
        r = await assert_eventually(lambda: _readyz(http, 200, "ready: ready-"), timeout_s=30, what="ready")
        scrape = (await http.get("/metrics")).text
        assert 'drctl_search_attributes_missing{namespace="default"} 0.0' in scrape
