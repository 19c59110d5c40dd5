"""The drill probes that ask the FleetMonitor (`monitor_status`, `region_state`), over a real
Temporal dev server with a stand-in monitor workflow that answers the `status` query as the real
one does (JSON of MonitorStatus).

Not in `make mutate`'s selection: mutmut forks each mutant's run from a process whose Temporal
runtime threads do not survive the fork, so a Temporal client there hangs.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from temporalio import workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from drctl.chaos import probes
from tests.support.config import fleet_config_data
from tests.support.loop_thread import LoopThread
from tests.support.temporal import start_local

STATUS = {
    "fleet": "test",
    "policy": "automatic",
    "regions": {"us-west-1": {"state": "UNHEALTHY"}, "us-east-1": {"state": "HEALTHY"}},
}


@workflow.defn(name="FleetMonitor")
class StatusOnly:
    def __init__(self) -> None:
        self._status: dict[str, Any] = {}

    @workflow.run
    async def run(self, status: dict[str, Any]) -> None:
        self._status = status
        await workflow.wait_condition(lambda: False)

    @workflow.query(name="status")
    def status(self) -> dict[str, Any]:
        return self._status


@pytest.fixture(scope="module")
def conf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    lt = LoopThread()
    try:
        env = lt.enter(lt.run(start_local()))
        queue = f"q-{uuid.uuid4()}"
        lt.enter(
            Worker(
                env.client,
                task_queue=queue,
                workflows=[StatusOnly],
                workflow_runner=UnsandboxedWorkflowRunner(),
            )
        )
        lt.run(env.client.start_workflow(StatusOnly.run, STATUS, id="monitor/test", task_queue=queue))
        data = fleet_config_data()
        data["temporal"]["address"] = env.client.service_client.config.target_host
        path = tmp_path_factory.mktemp("monitor") / "fleet.yaml"
        path.write_text(yaml.safe_dump(data))
        yield {"fleet_config": str(path)}
    finally:
        lt.close()


def test_region_state_reads_the_monitors_status(conf: dict[str, Any]) -> None:
    assert probes.monitor_status(conf) == STATUS
    assert probes.region_state("us-west-1", configuration=conf) == "UNHEALTHY"
    assert probes.region_state("us-east-1", configuration=conf) == "HEALTHY"
    with pytest.raises(LookupError) as info:
        probes.region_state("mars-1", configuration=conf)
    assert str(info.value) == "the monitor reports no region 'mars-1'"
