"""Velero stuck in InProgress, and Velero ending PartiallyFailed, through the product's activity.

The dev stack's Velero agent takes both faults from its faults ConfigMap (dev stack only), so the
product's side is the real one: `create_backup` run by temporalio's ActivityEnvironment (which
records heartbeats) against the emulated cluster.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.backup import BackupActivities
from drctl.config.schema import FleetConfig
from drctl.devstack.velero_agent import FAULTS_CONFIGMAP
from drctl.models.backup import BackupInfo, BackupRequest
from tests.support.backup_stack import BackupStack

REGION = "us-west-1"


@pytest.fixture
async def velero_fault(backup_stack: BackupStack) -> AsyncIterator[Callable[[str], Awaitable[None]]]:
    cluster = backup_stack.clusters[REGION]
    ns = backup_stack.cfg.backup.namespace

    async def inject(value: str) -> None:
        await cluster.ensure(
            "v1/configmaps",
            {"metadata": {"name": FAULTS_CONFIGMAP, "namespace": ns}, "data": {"backup": value}},
        )

    yield inject
    await cluster.delete_object("v1/configmaps", ns, FAULTS_CONFIGMAP)


def _cfg(stack: BackupStack, **backup: object) -> FleetConfig:
    return stack.cfg.model_copy(update={"backup": stack.cfg.backup.model_copy(update=backup)})


def _run(cfg: FleetConfig, name: str, beats: list[object]) -> BackupInfo:
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details[0])
    return env.run(
        BackupActivities(cfg).create_backup, BackupRequest(region=REGION, name=name, namespaces=["inference"])
    )


async def test_backup_stuck_in_progress_ends_at_its_deadline_naming_the_backup(
    backup_stack: BackupStack, velero_fault: Callable[[str], Awaitable[None]]
) -> None:
    await velero_fault("stall")
    name = f"stuck-{uuid.uuid4().hex[:6]}"
    beats: list[object] = []
    with pytest.raises(ApplicationError) as err:
        await asyncio.to_thread(_run, _cfg(backup_stack, timeout_s=1.5), name, beats)
    e = err.value
    assert e.type == "BackupTimeout" and e.non_retryable
    assert f"backup {name} still InProgress after 1.5s" in e.message
    assert e.details and e.details[0]["phase"] == "InProgress"  # the last state, for the workflow's report
    # It heartbeat all along: a stuck Velero shows in the UI as InProgress, not as silence.
    assert len(beats) >= 3 and all(b == {"phase": "InProgress", "items": 0} for b in beats[1:])


async def test_partially_failed_backup_is_refused_by_default(
    backup_stack: BackupStack, velero_fault: Callable[[str], Awaitable[None]]
) -> None:
    await velero_fault("partially-failed")
    name = f"partial-{uuid.uuid4().hex[:6]}"
    with pytest.raises(ApplicationError) as err:
        await asyncio.to_thread(_run, _cfg(backup_stack, partially_failed_ok=False), name, [])
    e = err.value
    assert e.type == "BackupFailed" and e.non_retryable
    assert f"backup {name} in {REGION} PartiallyFailed (1 error(s))" in e.message
    assert "backup.partially_failed_ok" in e.message


async def test_partially_failed_backup_accepted_by_policy_says_so(
    backup_stack: BackupStack,
    velero_fault: Callable[[str], Awaitable[None]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    await velero_fault("partially-failed")
    name = f"partial-ok-{uuid.uuid4().hex[:6]}"
    info = await asyncio.to_thread(_run, _cfg(backup_stack, partially_failed_ok=True), name, [])
    # Accepted, and still reported as what it is: the phase and the error count travel in the result.
    assert info.phase == "PartiallyFailed" and info.errors == 1
    assert any("PartiallyFailed" in r.getMessage() and name in r.getMessage() for r in caplog.records)
