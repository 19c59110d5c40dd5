"""`drctl migrate` copies the model artifacts with rclone and verifies them before the Velero restore."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import Client

from drctl.client.outcome import result_of
from drctl.config.schema import FleetConfig
from drctl.models.migration import MigrationResult, migration_request
from drctl.models.upgrade import Outcome
from tests.support.config import tuned
from tests.support.moto import aws_client
from tests.support.upgrade import fresh_queues, running_worker, start_migration

pytestmark = pytest.mark.devstack


def s3(cfg: FleetConfig):  # type: ignore[no-untyped-def]
    return aws_client("s3", cfg.aws.endpoint_url)


async def migrate(client: Client, cfg: FleetConfig):  # type: ignore[no-untyped-def]
    req = migration_request(cfg, uuid.uuid4().hex[:8], "us-west-1", "us-east-1", steps_percent=[100])
    req = req.model_copy(
        update={"step_pause_s": 1.0, "limits": req.limits.model_copy(update={"min_samples": 8})}
    )
    async with running_worker(client, cfg):
        handle = await start_migration(client, cfg, req)
        return await asyncio.wait_for(result_of(handle, MigrationResult), timeout=180)


async def test_artifacts_copied_and_verified_before_the_restore(
    fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None
) -> None:
    cfg = fresh_queues(fleet_config)
    key = f"adapters/new-{uuid.uuid4().hex[:6]}/adapter_model.safetensors"
    c = s3(cfg)
    c.put_object(Bucket="drctl-models-us-west-1", Key=key, Body=b"lora" * 100)  # only the source has it
    try:
        res = await migrate(temporal_client, cfg)
        assert res.outcome is Outcome.SUCCEEDED, res
        assert res.artifacts is not None and res.artifacts.verified
        (run,) = [r for r in res.artifacts.runs if r.bucket == "models"]
        assert run.stats.transfers == 1 and run.stats.bytes == 400 and run.check_ok and run.lag.lag_s == 0.0
        assert c.get_object(Bucket="drctl-models-us-east-1", Key=key)["Body"].read() == b"lora" * 100
        assert res.restore is not None and res.restore.phase == "Completed"
    finally:
        for b in ("drctl-models-us-west-1", "drctl-models-us-east-1"):
            c.delete_object(Bucket=b, Key=key)


async def test_unreadable_artifacts_stop_the_migration_before_anything_changes(
    fleet_config: FleetConfig, temporal_client: Client, reset_fleet: None
) -> None:
    cfg = fresh_queues(fleet_config)
    (models, *rest) = cfg.data.buckets
    broken = tuned(models, "source", bucket="drctl-no-such-bucket")
    cfg = tuned(cfg, "data", buckets=[broken, *rest])
    res = await migrate(temporal_client, cfg)
    assert res.outcome is Outcome.FAILED and res.failed_step == "artifacts", res
    assert (
        "model artifacts not copied, nothing changed" in res.reason and "drctl-no-such-bucket" in res.reason
    )
    assert res.backup is None and res.restore is None
    assert "global weights untouched: traffic had not moved yet" in res.rollback
