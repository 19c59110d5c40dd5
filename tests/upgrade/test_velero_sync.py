"""Velero across clusters: a backup taken in one cluster is known in another only after backup sync.

The stack here runs its agents' backup sync once at start and then, in effect, never (a period of an
hour), so each test decides when the target cluster imports a backup by running one sync pass itself.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.backup import BackupActivities
from drctl.config.schema import FleetConfig
from drctl.devstack.velero_sync import sync_backups
from drctl.models.backup import BackupInfo, BackupName, BackupRequest, RestoreRequest
from drctl.providers.errors import ProviderError
from drctl.providers.velero import VeleroBackupProvider
from drctl.providers.velero_schedule import VeleroSchedules
from tests.support.backup_stack import BackupStack, backup_clusters
from tests.support.wait import assert_eventually

WEST, EAST = "us-west-1", "us-east-1"


@pytest.fixture(scope="module")
async def slow_sync() -> AsyncIterator[BackupStack]:
    async with backup_clusters(sync_s=3600) as stack:
        yield stack


async def _sync(stack: BackupStack, region: str) -> list[str]:
    agent = stack.agents[region]
    return await sync_backups(agent, agent.store, stack.cfg.backup.bucket)


def _cfg(stack: BackupStack, **backup: object) -> FleetConfig:
    backup.setdefault("restore_namespaces", ["moved"])
    return stack.cfg.model_copy(update={"backup": stack.cfg.backup.model_copy(update=backup)})


async def _backup_in_west(stack: BackupStack) -> str:
    name = f"b-{uuid.uuid4().hex[:8]}"
    info = await asyncio.to_thread(
        VeleroBackupProvider(stack.cfg, WEST).backup,
        BackupRequest(region=WEST, name=name, namespaces=["inference"]),
    )
    assert info.phase == "Completed", info
    return name


async def _phase(provider: VeleroBackupProvider, restore: str) -> BackupInfo:
    async def done() -> BackupInfo:
        info = await asyncio.to_thread(provider._get, "restores", restore)
        assert (info.get("status") or {}).get("phase") not in (None, "", "New", "InProgress"), info
        return BackupInfo(
            name=restore,
            region=provider.region,
            phase=info["status"]["phase"],
            failure_reason="; ".join(info["status"].get("validationErrors") or []),
        )

    return await assert_eventually(done, timeout_s=10, what=f"restore {restore} ends")


async def test_a_restore_before_backup_sync_fails_validation_as_velero_does(slow_sync: BackupStack) -> None:
    name = await _backup_in_west(slow_sync)
    east = VeleroBackupProvider(_cfg(slow_sync), EAST)
    req = RestoreRequest(region=EAST, name=f"early-{name}", backup_name=name, namespace_mapping={})
    await asyncio.to_thread(east.create_restore, req)  # no wait: what a restore did before the fix
    early = await _phase(east, req.name)
    assert early.phase == "FailedValidation", early
    assert f"can't find backup velero/{name}" in (early.failure_reason or ""), early

    assert name in await _sync(slow_sync, EAST)
    synced = await asyncio.to_thread(east._get, "backups", name)
    # As the sync controller: this cluster's location name on spec and label; the source's labels kept.
    assert synced["status"]["phase"] == "Completed" and synced["spec"]["storageLocation"] == "default"
    labels = synced["metadata"]["labels"]
    assert labels["velero.io/storage-location"] == "default" and labels["drctl.io/region"] == WEST, labels
    late = req.model_copy(update={"name": f"late-{name}"})
    await asyncio.to_thread(east.create_restore, late)
    assert (await _phase(east, late.name)).phase == "Completed"


async def test_a_restore_waits_until_the_target_lists_the_backup(slow_sync: BackupStack) -> None:
    name = await _backup_in_west(slow_sync)
    east = VeleroBackupProvider(_cfg(slow_sync), EAST)
    seen: list[str] = []
    req = RestoreRequest(region=EAST, name=f"r-{name}", backup_name=name, namespace_mapping={})
    restoring = asyncio.create_task(asyncio.to_thread(east.restore, req, lambda i: seen.append(i.phase)))
    # The restore is waiting on a backup the target does not list yet; then the target's sync runs.
    await assert_eventually(lambda: asyncio.sleep(0, "absent" in seen), what="the restore waits for sync")
    assert not restoring.done()
    await _sync(slow_sync, EAST)
    restored = await asyncio.wait_for(restoring, timeout=30)
    assert restored.phase == "Completed", restored


async def test_a_backup_never_synced_ends_the_wait_naming_backup_cluster_and_wait(
    slow_sync: BackupStack,
) -> None:
    name = f"never-{uuid.uuid4().hex[:8]}"
    cfg = _cfg(slow_sync, sync_timeout_s=0.5)
    env = ActivityEnvironment()
    with pytest.raises(ApplicationError) as err:
        await asyncio.to_thread(
            env.run, BackupActivities(cfg).wait_backup_synced, BackupName(region=EAST, name=name)
        )
    assert err.value.type == "BackupNotSynced" and err.value.non_retryable
    msg = str(err.value)
    assert f"backup {name} not known to {EAST}'s Velero after waiting 0.5s" in msg, msg
    assert "backup.sync_timeout_s" in msg, msg

    # The restore itself ends the same way, before it writes anything into the cluster.
    east = VeleroBackupProvider(cfg, EAST)
    req = RestoreRequest(region=EAST, name=f"r-{name}", backup_name=name, namespace_mapping={})
    with pytest.raises(ProviderError, match=f"backup {name} not known to {EAST}"):
        await asyncio.to_thread(east.restore, req)
    with pytest.raises(ProviderError, match="NotFound|not found"):
        await asyncio.to_thread(east._get, "restores", req.name)


async def test_cluster_rpo_counts_only_the_regions_own_scheduled_backups(slow_sync: BackupStack) -> None:
    sched = f"rpo-{uuid.uuid4().hex[:6]}"
    ns = ["inference"]
    west = VeleroSchedules(slow_sync.cfg, WEST)
    east = VeleroSchedules(slow_sync.cfg, EAST)
    # Region A's schedule is broken; region B's, same name and same bucket, backs up at once.
    await asyncio.to_thread(west.create, sched, "not a schedule", "1h", ns, {"app": "llm"})
    await asyncio.to_thread(east.create, sched, "@every 1h", "1h", ns, {"app": "llm"})

    async def east_backed_up() -> str:
        got = await asyncio.to_thread(east.last_successful)
        assert got.name and got.name.startswith(f"{sched}-"), got
        return got.name

    fresh = await assert_eventually(east_backed_up, what="east's schedule took its backup")
    assert fresh in await _sync(slow_sync, WEST)
    imported = await asyncio.to_thread(west.velero._get, "backups", fresh)
    assert imported["status"]["phase"] == "Completed" and imported["spec"]["storageLocation"] == "default"
    assert imported["metadata"]["labels"]["velero.io/schedule-name"] == sched, imported

    stale = await asyncio.to_thread(west.last_successful)
    assert stale.name is None and stale.age_s is None and stale.error is None, stale


async def test_a_restore_outside_the_allow_list_is_refused_before_any_wait(slow_sync: BackupStack) -> None:
    cfg = _cfg(slow_sync, sync_timeout_s=30)
    east = VeleroBackupProvider(cfg, EAST)
    name = f"never-{uuid.uuid4().hex[:8]}"
    req = RestoreRequest(
        region=EAST, name=f"r-{name}", backup_name=name, namespace_mapping={"inference": "kube-system"}
    )
    with pytest.raises(ProviderError) as err:
        await asyncio.to_thread(east.restore, req)
    # Forbidden, not BackupNotSynced: the allow-list is judged first.
    assert err.value.error.kind == "Forbidden" and "kube-system" in str(err.value), err.value
