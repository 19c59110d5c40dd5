from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from kubernetes import client as k8s

from drctl.devstack.kube import serve_cluster
from tests.support.ports import free_port


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def api() -> AsyncIterator[k8s.ApiClient]:
    """A strict emulated cluster on loopback, with an official client pointed at it."""
    port = free_port()
    async with serve_cluster("127.0.0.1", port):
        cfg = k8s.Configuration()
        cfg.host = f"http://127.0.0.1:{port}"
        with k8s.ApiClient(cfg) as client:
            yield client
