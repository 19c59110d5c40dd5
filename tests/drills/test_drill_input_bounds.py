"""A drill started directly through Temporal with numbers the CLI would never send: the ChaosDrill
workflow fails at once, naming the field and its range, instead of retrying its first task forever
(a `timedelta` of 1e308 s, a sleep of 1/1e-300 s) or running with an unbounded load.

The worker is the product's own workflow on a real dev server (sandboxed, as `drctl worker` runs
it); no activity is registered, because none may be reached.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from drctl.config.schema import load_config
from drctl.models.drill import (
    MAX_ALTERNATIVES,
    DrillInput,
    DrillInputInvalid,
    ExperimentPlan,
    ExperimentRunInput,
)
from tests.support.cli import run_cli
from tests.support.config import drill_config, write_fleet_config
from workflows.drill import ChaosDrill

PLAN = ExperimentPlan.model_validate(
    {"path": "experiments/region-outage.json", "name": "region-outage", "title": "Region outage"}
    | {"text": "{}", "target_region": "us-west-1", "expect_failover": True}
)


def _good() -> dict[str, Any]:
    cfg = load_config(write_fleet_config())
    return DrillInput.from_config(cfg, PLAN).model_dump(mode="json")


HOSTILE: list[tuple[dict[str, Any], str]] = [
    ({"load_rps": 1e308}, "load_rps"),
    ({"load_rps": 1_000}, "load_rps"),
    ({"timeout_s": 10**12}, "timeout_s"),
    ({"timeout_s": -1}, "timeout_s"),
    ({"rto_target_s": True}, "rto_target_s"),
    ({"failback_timeout_s": 1e9}, "failback_timeout_s"),
    ({"spec": {"interval_s": 1e9}}, "interval_s"),
    ({"spec": {"approval_timeout_s": "forever"}}, "approval_timeout_s"),
]


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merged(base[k], v) if isinstance(v, dict) else v
    return out


@pytest.mark.parametrize("over, field", HOSTILE, ids=lambda v: str(v)[:40])
def test_the_models_refuse_what_the_config_could_not_produce(over: dict[str, Any], field: str) -> None:
    with pytest.raises(DrillInputInvalid, match=field):
        DrillInput.model_validate(_merged(_good(), over))
    assert DrillInput.model_validate(_good()).load_rps == 5.0


def test_the_experiment_input_is_bounded_too() -> None:
    good = {"plan": PLAN.model_dump(), "workflow_id": "drill/x", "load_rps": 5, "timeout_s": 60}
    assert ExperimentRunInput.model_validate(good).warmup_s == 1.0
    for over in ({"load_rps": 0}, {"timeout_s": 1e12}, {"warmup_s": 1e9}, {"load_tail_s": -5}):
        with pytest.raises(DrillInputInvalid, match=next(iter(over))):
            ExperimentRunInput.model_validate({**good, **over})


async def test_a_hostile_drill_started_through_temporal_fails_with_the_reason(
    temporal_env: WorkflowEnvironment,
) -> None:
    client: Client = temporal_env.client
    queue = f"drill-bounds-{uuid.uuid4().hex[:8]}"
    async with Worker(client, task_queue=queue, workflows=[ChaosDrill]):
        for over, field in HOSTILE[:4] + HOSTILE[-1:]:
            handle = await client.start_workflow(
                "ChaosDrill",
                _merged(_good(), over),
                id=f"drill/bounds/{uuid.uuid4().hex[:8]}",
                task_queue=queue,
            )
            with pytest.raises(WorkflowFailureError) as err:
                await asyncio.wait_for(handle.result(), timeout=30)  # a task retry loop never ends
            cause = err.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == "DrillInputInvalid", cause
            assert field in cause.message and "refused" in cause.message, cause.message
            history = [e async for e in handle.fetch_history_events()]
            assert not any(e.HasField("workflow_task_failed_event_attributes") for e in history)
            assert not any(e.HasField("activity_task_scheduled_event_attributes") for e in history)


def test_a_schedule_of_more_experiments_than_a_drill_input_holds_is_refused(tmp_path: Path) -> None:
    cfg = drill_config(tmp_path)
    experiment = str(Path(__file__).resolve().parents[2] / "experiments" / "region-outage.json")
    argv = ["drill", "schedule", "--cron", "0 3 * * MON", "-c", str(cfg)]
    code, out, err = run_cli([*argv, *(["-e", experiment] * (MAX_ALTERNATIVES + 2))])
    assert code == 2 and f"at most {MAX_ALTERNATIVES + 1} files" in err and "Traceback" not in out + err, err
