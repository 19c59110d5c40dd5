"""/readyz on a namespace without drctl's search attributes: not ready, saying which and how to fix it.

A real Temporal dev server started without the attributes (the module's own: the session dev stack
registers them), a real worker on it, and then the registration an operator would run.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from drctl.config.schema import FleetConfig
from drctl.models.search_attributes import ALL
from drctl.worker.process import run_worker
from tests.helpers import assert_eventually, free_port


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def bare_env() -> AsyncIterator[WorkflowEnvironment]:
    temporal = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal, data_converter=pydantic_data_converter
    ) as e:
        yield e


def _on(cfg: FleetConfig, env: WorkflowEnvironment) -> FleetConfig:
    tq = f"ready-{uuid.uuid4().hex[:8]}"
    regions = [r.model_copy(update={"task_queue": f"{tq}-{r.name}"}) for r in cfg.regions]
    address = env.client.service_client.config.target_host
    return cfg.model_copy(
        update={
            "temporal": cfg.temporal.model_copy(update={"address": address, "task_queue": tq}),
            "regions": regions,
            "worker": cfg.worker.model_copy(update={"http_host": "127.0.0.1"}),
        }
    )


async def test_a_namespace_without_the_attributes_is_not_ready_and_says_why(
    fleet_config: FleetConfig, bare_env: WorkflowEnvironment
) -> None:
    cfg = _on(fleet_config, bare_env)
    port = free_port()
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(cfg, stop=stop, http_port=port))
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(timeout=10) as http:

            async def answered() -> httpx.Response:
                try:
                    return await http.get(f"{base}/readyz")
                except httpx.TransportError as exc:
                    raise AssertionError(f"not listening yet: {exc}") from None

            r = await assert_eventually(answered, timeout_s=30, interval_s=0.2, what="the endpoint")
            # The workers run and Temporal is healthy: only the attributes keep it from being ready.
            assert r.status_code == 503, r.text
            assert "namespace default lacks drctl's search attributes" in r.text
            assert all(f"{key.name} missing" in r.text for key in ALL), r.text
            assert "temporal operator search-attribute create --name DrctlFleet" in r.text
            scrape = (await http.get(f"{base}/metrics")).text
            assert f'drctl_search_attributes_missing{{namespace="default"}} {float(len(ALL))}' in scrape

            await bare_env.client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(
                    namespace="default",
                    search_attributes={k.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for k in ALL},
                )
            )

            async def ready() -> httpx.Response:
                r = await http.get(f"{base}/readyz")
                assert r.status_code == 200, r.text
                return r

            r = await assert_eventually(ready, timeout_s=30, interval_s=0.5, what="ready once registered")
            assert cfg.temporal.task_queue in r.text
            scrape = (await http.get(f"{base}/metrics")).text
            assert 'drctl_search_attributes_missing{namespace="default"} 0.0' in scrape
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
