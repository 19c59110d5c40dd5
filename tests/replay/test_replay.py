"""Replay every recorded history against the current workflow code, offline (no server).

A workflow whose commands changed order without `workflow.patched()` fails here with a
non-determinism error, the same error every in-flight execution would hit after a deploy.
Histories are recorded by `python -m tests.replay.record` (see its docstring for when to re-record).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from drctl.worker import registry

HISTORIES = Path(__file__).parent / "histories"
FILES = sorted(HISTORIES.glob("*.json"))
# Read once at collection: the files are small, and the async test then does no blocking I/O.
TEXTS = {p.stem: p.read_text() for p in FILES}
# Every workflow an operator starts; each must keep a recorded history (the lock, Notify and
# Replicate children are exercised inside these).
REQUIRED_TYPES = {
    "Failover",
    "Failback",
    "FleetMonitor",
    "Upgrade",
    "ChaosDrill",
    "Migration",
    "Backup",
    "Restore",
}


def _workflow_type(text: str) -> str:
    first = json.loads(text)["events"][0]
    return first["workflowExecutionStartedEventAttributes"]["workflowType"]["name"]


def test_every_required_workflow_has_a_recorded_history() -> None:
    # Guards against the replay test passing vacuously after a fixture is deleted or renamed.
    assert REQUIRED_TYPES <= {_workflow_type(t) for t in TEXTS.values()}, sorted(TEXTS)


@pytest.mark.parametrize("name", sorted(TEXTS))
async def test_history_replays_against_current_code(name: str) -> None:
    history = WorkflowHistory.from_json(f"replay-{name}", TEXTS[name])
    replayer = Replayer(workflows=registry.workflows(), data_converter=pydantic_data_converter)
    # raise_on_replay_failure: a NondeterminismError (or any task failure) fails the test with its message.
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
