"""The Migration and Restore workflows against two clusters whose Velero imports the other's backups
only through backup sync: each waits for the target to list the backup (phase `sync`), and a target
that never does ends the wait with an error naming the backup, the cluster and the wait; the
migration then rolls back.

Real product workers on a Temporal dev server of the module's own; the clusters are the backup
stack's, whose agents sync once at start and then only when a test runs a pass.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.testing import WorkflowEnvironment

from drctl.client.operations import start_operation
from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.devstack.velero_sync import sync_backups
from drctl.models.backup import BackupJobResult, BackupRequest, RestoreJob, RestoreRequest
from drctl.models.migration import MigrationRequest, MigrationResult, MigrationStatus, migration_request
from drctl.models.upgrade import Outcome
from drctl.providers.velero import VeleroBackupProvider
from tests.support.backup_stack import BackupStack, backup_clusters
from tests.support.upgrade import fresh_queues, running_worker, start_migration
from tests.support.wait import assert_eventually
from workflows.backup import Restore

WEST, EAST = "us-west-1", "us-east-1"


@pytest.fixture(scope="module")
async def slow_sync() -> AsyncIterator[BackupStack]:
    async with backup_clusters(sync_s=3600) as stack:
        yield stack


def _name(req: MigrationRequest) -> str:
    return f"migrate-{req.migration_id}"


def _request(stack: BackupStack, sync_timeout_s: float) -> tuple[FleetConfig, MigrationRequest]:
    backup = stack.cfg.backup.model_copy(update={"sync_timeout_s": sync_timeout_s})
    cfg = fresh_queues(stack.cfg.model_copy(update={"backup": backup}))
    return cfg, migration_request(cfg, uuid.uuid4().hex[:8], WEST, EAST, steps_percent=[100])


async def test_migration_waits_in_phase_sync_until_the_target_lists_the_backup(
    slow_sync: BackupStack, temporal_env: WorkflowEnvironment
) -> None:
    cfg, req = _request(slow_sync, sync_timeout_s=60)
    async with running_worker(temporal_env.client, cfg):
        handle = await start_migration(temporal_env.client, cfg, req)

        async def waiting() -> MigrationStatus:
            st = await handle.query("status", result_type=MigrationStatus)
            assert st.phase == "sync", st.phase
            return st

        await assert_eventually(waiting, timeout_s=60, what="the migration waits for backup sync")
        # The Temporal UI's details say what it waits for.
        meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert f"waiting for {EAST} to sync backup {_name(req)}" in meta.current_details, meta.current_details
        agent = slow_sync.agents[EAST]
        await sync_backups(agent, agent.store, slow_sync.cfg.backup.bucket)
        res = await asyncio.wait_for(result_of(handle, MigrationResult), timeout=120)
    # The restore ran against a backup the target knew. What follows needs a fleet this stack has not.
    assert res.restore is not None and res.restore.phase == "Completed", res
    assert res.failed_step not in ("sync", "restore"), res


async def test_a_target_that_never_syncs_ends_the_wait_and_rolls_back(
    slow_sync: BackupStack, temporal_env: WorkflowEnvironment
) -> None:
    cfg, req = _request(slow_sync, sync_timeout_s=1.0)
    async with running_worker(temporal_env.client, cfg):
        handle = await start_migration(temporal_env.client, cfg, req)
        res = await asyncio.wait_for(result_of(handle, MigrationResult), timeout=120)
    assert res.outcome is Outcome.ROLLED_BACK and res.failed_step == "sync", res
    name = _name(req)
    assert f"backup {name} not known to {EAST}'s Velero after waiting 1s for backup sync" in res.reason, res
    assert res.restore is None
    assert res.rollback[-1].startswith(f"{EAST} restored from its own backup {name}-rollback"), res.rollback


async def test_drctl_restore_waits_in_phase_sync_for_a_backup_taken_elsewhere(
    slow_sync: BackupStack, temporal_env: WorkflowEnvironment
) -> None:
    cfg, _ = _request(slow_sync, sync_timeout_s=60)
    name = f"b-{uuid.uuid4().hex[:8]}"
    taken = await asyncio.to_thread(
        VeleroBackupProvider(cfg, WEST).backup,
        BackupRequest(region=WEST, name=name, namespaces=["inference"]),
    )
    assert taken.phase == "Completed", taken
    req = RestoreRequest(region=EAST, name=f"r-{name}", backup_name=name, namespace_mapping={})
    async with running_worker(temporal_env.client, cfg):
        handle = await start_operation(
            temporal_env.client,
            cfg,
            Restore.run,
            RestoreJob(fleet=cfg.name, queue=cfg.region(EAST).queue, request=req),
            operation="restore",
            workflow_id=f"restore/{cfg.name}/{req.name}",
            target=EAST,
        )

        async def waiting() -> str:
            meta = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
            assert f"waiting for {EAST} to sync backup {name}" in meta.current_details, meta.current_details
            return meta.current_details

        await assert_eventually(waiting, timeout_s=60, what="the restore waits for backup sync")
        agent = slow_sync.agents[EAST]
        await sync_backups(agent, agent.store, slow_sync.cfg.backup.bucket)
        res = await asyncio.wait_for(result_of(handle, BackupJobResult), timeout=60)
    assert res.ok and res.info is not None and res.info.phase == "Completed", res
