"""Failback's production stabilisation window, on Temporal's time-skipping test server.

The workflow's timers run in skipped time while its activities are drctl's real ones acting on the
real dev stack (probes over HTTP, weights over the HAProxy runtime socket, Kubernetes capacity), so
a 600 s window costs seconds of wall time and still proves nothing moved before it elapsed.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.api.enums.v1 import EventType, IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.operations import OperationActivities
from drctl.client.operations import search_attributes
from drctl.config.schema import FleetConfig
from drctl.devstack import stack
from drctl.models import search_attributes as sa
from drctl.models.failover import FailbackInput, FailbackResult
from drctl.models.fleet_spec import FleetSpec
from drctl.models.lock import lock_id
from drctl.models.phases import QUERY_PROGRESS, OperationProgress
from drctl.providers.traffic_factory import global_traffic
from drctl.worker import registry
from tests.support.workers import fast_config, weights
from workflows.failback import Failback
from workflows.lock import FleetLock

pytestmark = [pytest.mark.slow, pytest.mark.devstack]

TEST_SERVER = Path(sys.executable).parent / "temporal-test-server"
WINDOW_S = 600.0


@pytest_asyncio.fixture(loop_scope="session")
async def time_skipping_env(dev_stack: stack.StackInfo) -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=str(TEST_SERVER), data_converter=pydantic_data_converter
    )
    try:
        # The test server validates search attributes like a real one, and the workflows upsert
        # drctl's (phase, target, verdict) at every phase: register them as `drctl dev up` does.
        await env.client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=env.client.namespace,
                search_attributes={k.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for k in sa.ALL},
            )
        )
        yield env
    finally:
        await env.shutdown()


class DevServerLock(OperationActivities):
    """The real lock activities, talking to the dev Temporal server where `lock/<fleet>` runs.

    The time-skipping test server implements neither update-with-start nor visibility, so the
    fleet lock lives on the dev stack's server, as it would for every other operation on the fleet.
    """

    def __init__(self, cfg: FleetConfig, client: Client) -> None:
        super().__init__(cfg)
        self.client = client

    def _client(self) -> Client:
        return self.client


def activities(cfg: FleetConfig, dev_client: Client) -> list[Callable[..., Any]]:
    lock = DevServerLock(cfg, dev_client)
    mine = {"acquire_fleet", "holders_closed"}
    real = [a for a in registry.activities(cfg) if getattr(a, "__name__", "") not in mine]
    return [*real, lock.acquire_fleet, lock.holders_closed]


async def test_failback_waits_out_a_600s_stabilization_window_before_its_first_step(
    time_skipping_env: WorkflowEnvironment,
    temporal_client: Client,
    fleet_config: FleetConfig,
    reset_fleet: None,
) -> None:
    env = time_skipping_env
    base = fast_config(fleet_config)
    # Production pacing: a probe every 10 s through a 10-minute window, then 2 steps 60 s apart.
    cfg = base.model_copy(
        update={
            "health": base.health.model_copy(update={"interval_s": 10.0}),
            "failback": base.failback.model_copy(
                update={"stabilization_window_s": WINDOW_S, "steps": 2, "step_interval_s": 60.0}
            ),
        }
    )
    before = {"us-west-1": 0, "us-east-1": 100}
    global_traffic(cfg).set_weights(before)
    acts = activities(cfg, temporal_client)
    queues = [cfg.temporal.task_queue, *(r.queue for r in cfg.regions)]
    with ThreadPoolExecutor(max_workers=8) as executor:
        workers = [
            Worker(
                env.client,
                task_queue=q,
                workflows=[Failback] if q == cfg.temporal.task_queue else [],
                activities=acts,
                activity_executor=executor,
            )
            for q in queues
        ]
        # The fleet's lock runs on the dev server (see DevServerLock).
        workers.append(
            Worker(
                temporal_client,
                task_queue=cfg.temporal.task_queue,
                workflows=[FleetLock],
                activities=acts,
                activity_executor=executor,
            )
        )
        runs = [asyncio.create_task(w.run()) for w in workers]
        try:
            started = await env.get_current_time()
            handle = await env.client.start_workflow(
                Failback.run,
                FailbackInput(spec=FleetSpec.from_config(cfg)),
                id=f"failback/{cfg.name}",
                task_queue=cfg.temporal.task_queue,
                search_attributes=search_attributes(cfg.name, "failback", None, "us-west-1"),
            )
            with env.auto_time_skipping_disabled():
                # Skip to 10 s before the window can have elapsed: still stabilising, nothing moved.
                await env.sleep(WINDOW_S - 10)
                progress = await handle.query(QUERY_PROGRESS, result_type=OperationProgress)
                mid = await env.get_current_time()
                mid_weights = weights(cfg)
            res: FailbackResult = await asyncio.wait_for(handle.result(), 120)
            history = await handle.fetch_history()
        finally:
            # The failback's release signal went to the test server, which has no lock: end it here.
            with contextlib.suppress(RPCError):
                await temporal_client.get_workflow_handle(lock_id(cfg.name)).terminate("test done")
            await asyncio.gather(*(w.shutdown() for w in workers), return_exceptions=True)
            for t in runs:
                t.cancel()
    assert mid - started >= timedelta(seconds=WINDOW_S - 10)
    assert progress.phase == "stabilize" and mid_weights == before, (progress, mid_weights)
    assert res.status == "succeeded", res.error
    assert (res.steps_done, res.steps_planned) == (2, 2)
    assert weights(cfg) == {"us-west-1": 60, "us-east-1": 40}
    # The server's own record, in workflow time: every weight change was scheduled after the window.
    scheduled = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]
    sets = [
        e.event_time.ToDatetime()
        for e in scheduled
        if e.activity_task_scheduled_event_attributes.activity_type.name == "set_global_weights"
    ]
    probes = [
        e
        for e in scheduled
        if e.activity_task_scheduled_event_attributes.activity_type.name == "probe_regions"
    ]
    stabilize = next(p for p in res.phases if p.phase == "stabilize")
    assert len(sets) == 2 and all(
        t >= stabilize.started_at.replace(tzinfo=None) + timedelta(seconds=WINDOW_S) for t in sets
    ), (stabilize, sets)
    # The window was watched, not just slept: a real probe of us-west-1 every interval through it.
    assert len(probes) >= WINDOW_S / 10.0, len(probes)
    # The steps run after the window, one step interval apart (real probes ran in between).
    assert sets[1] - sets[0] >= timedelta(seconds=60)
    assert [p.phase for p in res.phases][:4] == ["claim", "stabilize", "step-1-of-2", "step-2-of-2"]
