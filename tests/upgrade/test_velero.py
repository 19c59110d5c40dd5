"""The Velero provider against the dev stack's Velero agent: emulated clusters and moto S3."""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
import uuid

import pytest

from drctl.config.schema import FleetConfig
from drctl.devstack.kube import ApiError
from drctl.models.backup import BackupInfo, BackupRequest, RestoreRequest
from drctl.providers.velero import BackupFailed, VeleroBackupProvider, judge_phase
from tests.support.backup_stack import BackupStack


def _deployment(name: str, ns: str, labels: dict[str, str], image: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "server", "image": image}]},
            },
        },
    }


async def _workload(stack: BackupStack, region: str, ns: str, image: str) -> None:
    cluster = stack.clusters[region]
    await cluster.ensure("v1/namespaces", {"metadata": {"name": ns}})
    app = {"app": "llm", "drctl.io/track": "stable"}
    await cluster.ensure("apps/v1/deployments", _deployment("llm-stable", ns, app, image))
    await cluster.ensure(
        "v1/services",
        {
            "metadata": {"name": "llm-stable", "namespace": ns, "labels": app},
            "spec": {"selector": app, "ports": [{"port": 8000}], "clusterIP": "10.96.100.7"},
        },
    )
    # Not the app's: a label selector must leave it out of the backup.
    await cluster.ensure("apps/v1/deployments", _deployment("other", ns, {"app": "other"}, "busybox"))


def _tar_members(stack: BackupStack, name: str) -> dict[str, dict]:
    body = stack.s3.get_object(Bucket=stack.cfg.backup.bucket, Key=f"backups/{name}/{name}.tar.gz")[
        "Body"
    ].read()
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
        return {m.name: json.loads(tar.extractfile(m).read()) for m in tar.getmembers()}


async def test_backup_lands_in_s3_in_velero_layout_and_restores_elsewhere(backup_stack: BackupStack) -> None:
    ns = f"app-{uuid.uuid4().hex[:6]}"
    await _workload(backup_stack, "us-west-1", ns, "vllm/vllm-openai:v0.6.4")
    west = VeleroBackupProvider(backup_stack.cfg, "us-west-1")
    name = f"b-{uuid.uuid4().hex[:8]}"
    seen: list[str] = []
    info = await asyncio.to_thread(
        west.backup,
        BackupRequest(region="us-west-1", name=name, namespaces=[ns], label_selector={"app": "llm"}),
        lambda i: seen.append(i.phase),
    )
    assert info.phase == "Completed" and info.items == 2, info
    assert info.expiration and info.storage_location == "default"
    members = _tar_members(backup_stack, name)
    assert sorted(members) == [
        f"resources/deployments.apps/namespaces/{ns}/llm-stable.json",
        f"resources/services/namespaces/{ns}/llm-stable.json",
    ]
    meta = json.loads(
        backup_stack.s3.get_object(
            Bucket=backup_stack.cfg.backup.bucket, Key=f"backups/{name}/velero-backup.json"
        )["Body"].read()
    )
    assert meta["kind"] == "Backup" and meta["spec"]["includedNamespaces"] == [ns]
    assert meta["spec"]["labelSelector"] == {"matchLabels": {"app": "llm"}}
    assert name in [b.name for b in await asyncio.to_thread(west.list_backups)]

    # Restore into the other cluster, under another namespace: Velero shares the bucket.
    target_ns = f"{ns}-moved"
    allowed = backup_stack.cfg.backup.model_copy(update={"restore_namespaces": [target_ns]})
    east = VeleroBackupProvider(backup_stack.cfg.model_copy(update={"backup": allowed}), "us-east-1")
    restored = await asyncio.to_thread(
        east.restore,
        RestoreRequest(
            region="us-east-1", name=f"r-{name}", backup_name=name, namespace_mapping={ns: target_ns}
        ),
    )
    assert restored.phase == "Completed" and restored.items == 2, restored
    dep = backup_stack.clusters["us-east-1"].read_object("apps/v1/deployments", target_ns, "llm-stable")
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.6.4"
    assert dep["metadata"]["labels"]["velero.io/backup-name"] == name
    svc = backup_stack.clusters["us-east-1"].read_object("v1/services", target_ns, "llm-stable")
    # The source's clusterIP stays behind; the target allocated its own.
    assert svc["spec"]["clusterIP"] not in ("", "10.96.100.7") and svc["spec"]["clusterIPs"] == [
        svc["spec"]["clusterIP"]
    ]


async def test_existing_resource_policy_none_keeps_target_update_replaces(backup_stack: BackupStack) -> None:
    ns = f"app-{uuid.uuid4().hex[:6]}"
    await _workload(backup_stack, "us-west-1", ns, "img:new")
    await _workload(backup_stack, "us-east-1", ns, "img:old")
    west = VeleroBackupProvider(backup_stack.cfg, "us-west-1")
    # Restored in place, without a mapping: the namespace must be one a restore may write.
    east = VeleroBackupProvider(_allowing(backup_stack, ns), "us-east-1")
    name = f"b-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(
        west.backup,
        BackupRequest(region="us-west-1", name=name, namespaces=[ns], label_selector={"app": "llm"}),
    )

    def image() -> str:
        dep = backup_stack.clusters["us-east-1"].read_object("apps/v1/deployments", ns, "llm-stable")
        return dep["spec"]["template"]["spec"]["containers"][0]["image"]

    kept = await asyncio.to_thread(
        east.restore,
        RestoreRequest(
            region="us-east-1", name=f"r1-{name}", backup_name=name, existing_resource_policy="none"
        ),
    )
    assert kept.warnings == 2 and image() == "img:old"
    updated = await asyncio.to_thread(
        east.restore,
        RestoreRequest(
            region="us-east-1", name=f"r2-{name}", backup_name=name, existing_resource_policy="update"
        ),
    )
    assert updated.items == 2 and image() == "img:new"


def _allowing(stack: BackupStack, *namespaces: str) -> FleetConfig:
    backup = stack.cfg.backup.model_copy(update={"restore_namespaces": list(namespaces)})
    return stack.cfg.model_copy(update={"backup": backup})


async def test_a_restore_without_mapping_writes_only_the_allowed_namespaces(
    backup_stack: BackupStack,
) -> None:
    """Velero restores every namespace of a backup in place unless the Restore names them: drctl's
    Restore includes only those that land inside the allow-list, whatever the backup holds."""
    allowed, other = (f"app-{uuid.uuid4().hex[:6]}" for _ in range(2))
    for ns in (allowed, other):
        await _workload(backup_stack, "us-west-1", ns, "img:v1")
    name = f"b-{uuid.uuid4().hex[:8]}"
    await asyncio.to_thread(
        VeleroBackupProvider(backup_stack.cfg, "us-west-1").backup,
        BackupRequest(
            region="us-west-1", name=name, namespaces=[allowed, other], label_selector={"app": "llm"}
        ),
    )
    east = VeleroBackupProvider(_allowing(backup_stack, allowed), "us-east-1")
    restored = await asyncio.to_thread(
        east.restore, RestoreRequest(region="us-east-1", name=f"r-{name}", backup_name=name)
    )
    cluster = backup_stack.clusters["us-east-1"]
    assert restored.phase == "Completed" and restored.items == 2, restored
    assert sorted(restored.namespaces) == sorted(["inference", allowed])
    assert cluster.read_object("apps/v1/deployments", allowed, "llm-stable")
    with pytest.raises(ApiError, match="not found"):
        cluster.read_object("apps/v1/deployments", other, "llm-stable")
    spec = cluster.read_object("velero.io/v1/restores", "velero", f"r-{name}")["spec"]
    assert spec["includedNamespaces"] == sorted(["inference", allowed])
    # Mapped, the other namespace may land in an allowed one: the mapping's source is included.
    moved = f"{other}-moved"
    east = VeleroBackupProvider(_allowing(backup_stack, moved), "us-east-1")
    restored = await asyncio.to_thread(
        east.restore,
        RestoreRequest(
            region="us-east-1", name=f"m-{name}", backup_name=name, namespace_mapping={other: moved}
        ),
    )
    assert restored.items == 2 and sorted(restored.namespaces) == sorted(["inference", moved]), restored
    assert cluster.read_object("apps/v1/deployments", moved, "llm-stable")
    with pytest.raises(ApiError, match="not found"):
        cluster.read_object("apps/v1/deployments", allowed + "-moved", "llm-stable")


async def test_backup_to_missing_bucket_fails_with_reason(backup_stack: BackupStack) -> None:
    cluster = backup_stack.clusters["us-west-1"]
    await cluster.ensure(
        "velero.io/v1/backupstoragelocations",
        {
            "metadata": {"name": "broken", "namespace": "velero"},
            "spec": {"provider": "aws", "objectStorage": {"bucket": "no-such-bucket"}},
        },
    )
    cfg = backup_stack.cfg.model_copy(
        update={"backup": backup_stack.cfg.backup.model_copy(update={"storage_location": "broken"})}
    )
    provider = VeleroBackupProvider(cfg, "us-west-1")
    name = f"b-{uuid.uuid4().hex[:8]}"
    with pytest.raises(BackupFailed) as caught:
        await asyncio.to_thread(
            provider.backup, BackupRequest(region="us-west-1", name=name, namespaces=["inference"])
        )
    assert caught.value.info.phase == "Failed"
    assert "NoSuchBucket" in str(caught.value) and caught.value.error.retryable is False


async def test_unknown_storage_location_fails_validation(backup_stack: BackupStack) -> None:
    cfg = backup_stack.cfg.model_copy(
        update={"backup": backup_stack.cfg.backup.model_copy(update={"storage_location": "nowhere"})}
    )
    provider = VeleroBackupProvider(cfg, "us-west-1")
    with pytest.raises(BackupFailed, match="FailedValidation.*nowhere"):
        await asyncio.to_thread(
            provider.backup,
            BackupRequest(region="us-west-1", name=f"b-{uuid.uuid4().hex[:8]}", namespaces=["inference"]),
        )


def test_partially_failed_policy_is_explicit() -> None:
    info = BackupInfo(name="b", region="r", phase="PartiallyFailed", errors=2)
    assert "partially_failed_ok" in (judge_phase(info, partially_failed_ok=False) or "")
    assert judge_phase(info, partially_failed_ok=True) is None
    assert judge_phase(info.model_copy(update={"phase": "Completed"}), False) is None
    assert "FailedValidation" in (
        judge_phase(info.model_copy(update={"phase": "FailedValidation"}), True) or ""
    )
