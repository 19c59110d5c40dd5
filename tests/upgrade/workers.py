"""A drctl worker for one test: the product's own worker on fresh task queues (uuid4)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

import yaml
from temporalio.client import Client

from drctl.config import FleetConfig
from drctl.worker import build_workers


def fresh_queues(cfg: FleetConfig) -> FleetConfig:
    tag = uuid.uuid4().hex[:8]
    regions = [r.model_copy(update={"task_queue": f"t-{tag}-{r.name}"}) for r in cfg.regions]
    temporal = cfg.temporal.model_copy(update={"task_queue": f"t-{tag}"})
    return cfg.model_copy(update={"regions": regions, "temporal": temporal})


@asynccontextmanager
async def running_worker(client: Client, cfg: FleetConfig) -> AsyncIterator[None]:
    """All of drctl's workflows and activities on cfg's queues until the block exits."""
    with ThreadPoolExecutor(max_workers=16) as executor:
        workers = build_workers(client, cfg, None, executor)
        tasks = [asyncio.create_task(w.run()) for w in workers]
        try:
            yield
        finally:
            await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)
            await asyncio.gather(*tasks, return_exceptions=True)


def write_config(cfg: FleetConfig, directory: Path) -> Path:
    """`cfg` (fresh queues) as a file beside the session config, so relative paths still resolve."""
    path = directory / f"fleet-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return path
