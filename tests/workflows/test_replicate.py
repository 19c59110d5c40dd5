"""Replication as a user meets it on the dev stack: lag in `drctl status`, a failover refused for
lag over the RPO (and forced through), and the Replicate workflow healing the replica."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from temporalio.client import Client, WorkflowExecutionStatus

from drctl.config.schema import FleetConfig
from drctl.devstack.moto_seed import MODEL_FILES
from drctl.providers.kube_objects import on_conflict
from tests.support.cli import drctl
from tests.support.config import write_config
from tests.support.devstack import apps_api
from tests.support.moto import aws_client
from tests.support.temporal import closed_status
from tests.support.wait import assert_eventually
from tests.support.workers import StartWorkers, weights

pytestmark = [pytest.mark.slow, pytest.mark.devstack]

ADAPTER = "adapters/support-lora/adapter_model.safetensors"


def s3(url: str | None) -> Any:
    return aws_client("s3", url)


def models_lag(status_json: str) -> dict[str, Any]:
    (rep,) = [r for r in json.loads(status_json)["replication"] if r["bucket"] == "models"]
    return rep


async def test_lag_refuses_a_normal_failover_until_replication_catches_up(
    start_workers: StartWorkers, fleet_config_path: Path, temporal_client: Client
) -> None:
    cfg = await start_workers()
    path = write_config(cfg, fleet_config_path.parent)
    rpo = cfg.objectives.rpo_target_s
    replica = "drctl-models-us-east-1"
    client = s3(cfg.aws.endpoint_url)
    try:
        proc = await asyncio.to_thread(drctl, "status", "-o", "json", "-c", str(path))
        assert proc.returncode == 0, proc.stderr
        assert models_lag(proc.stdout)["lag_s"] == 0.0  # seeded in sync

        client.delete_object(Bucket=replica, Key=ADAPTER)

        async def lagging() -> dict[str, Any]:
            p = await asyncio.to_thread(drctl, "status", "-o", "json", "-c", str(path))
            rep = models_lag(p.stdout)
            assert rep["lag_s"] > rpo, rep
            return rep

        rep = await assert_eventually(lagging, timeout_s=30, interval_s=1, what="lag above the RPO")
        assert rep["missing"] == 1 and rep["oldest_unreplicated"] == ADAPTER
        table = await asyncio.to_thread(drctl, "status", "-c", str(path))
        assert "> RPO" in table.stdout and "models" in table.stdout, table.stdout

        refused = await asyncio.to_thread(drctl, "failover", "--to", "us-east-1", "--yes", "-c", str(path))
        assert refused.returncode == 1, refused.stdout + refused.stderr
        out = " ".join(refused.stdout.split())
        assert "replication lag of us-east-1" in out and f"> RPO {rpo:g} s" in out and "1 object(s)" in out, (
            out
        )
        assert weights(cfg) == cfg.weights  # refused in preflight: nothing moved

        forced = await asyncio.to_thread(
            drctl, "failover", "--to", "us-east-1", "--yes", "--force", "-o", "json", "-c", str(path)
        )
        assert forced.returncode == 0, forced.stdout + forced.stderr
        res = json.loads(forced.stdout)["result"]
        assert res["status"] == "succeeded"
        assert (
            res["data_loss"]["objects"] == 1
            and res["data_loss"]["lag_s"] > rpo
            and res["data_loss"]["forced"]
        )

        started = await asyncio.to_thread(drctl, "replicate", "start", "-c", str(path))
        assert started.returncode == 0 and "replicate%2F" in started.stdout, started.stdout + started.stderr

        async def healed() -> dict[str, Any]:
            p = await asyncio.to_thread(drctl, "replicate", "status", "-o", "json", "-c", str(path))
            assert p.returncode == 0, p.stderr
            (ps,) = [x for x in json.loads(p.stdout)["pairs"] if x["pair"]["bucket"] == "models"]
            last = ps["last"]
            assert last and last["check_ok"] and last["lag"]["lag_s"] == 0.0, last
            assert json.loads(p.stdout)["total_transfers"] >= 1  # the deleted adapter, copied back
            return last

        last = await assert_eventually(healed, timeout_s=60, interval_s=1, what="replica healed by a run")
        assert client.get_object(Bucket=replica, Key=ADAPTER)["Body"].read() == MODEL_FILES[ADAPTER]
        table = await asyncio.to_thread(drctl, "replicate", "status", "-c", str(path))
        assert "models" in table.stdout and "ok" in table.stdout, table.stdout
        proc = await asyncio.to_thread(drctl, "status", "-o", "json", "-c", str(path))
        assert models_lag(proc.stdout)["lag_s"] == 0.0
        stopped = await asyncio.to_thread(drctl, "replicate", "stop", "--yes", "-c", str(path))
        assert stopped.returncode == 0, stopped.stderr
        # Exit 0 only says the signal was sent: the workflow must finish its runs and complete.
        handle = temporal_client.get_workflow_handle(f"replicate/{cfg.name}")
        closed = await closed_status(handle, timeout_s=60, interval_s=0.5, what="replication closed")
        assert closed is WorkflowExecutionStatus.COMPLETED
        assert last["mode"] == "sync"
    finally:
        client.put_object(Bucket=replica, Key=ADAPTER, Body=MODEL_FILES[ADAPTER])


def set_model(cfg: FleetConfig, region: str, model: str | None) -> None:
    """Change what the region's stable Deployment serves, as a drifted release would (None: back to default)."""
    r = cfg.region(region)
    apps = apps_api(r.kube.api_url or "")
    name = cfg.workload.deployment_name("stable")

    def put() -> None:
        dep = apps.read_namespaced_deployment(name, r.kube.namespace)
        c = dep.spec.template.spec.containers[0]
        c.env = [e for e in c.env or [] if e.name != "FLEETSIM_MODEL"]
        if model is not None:
            c.env.append(k8s.V1EnvVar(name="FLEETSIM_MODEL", value=model))
        apps.replace_namespaced_deployment(name, r.kube.namespace, dep)

    on_conflict(put)  # the node agent writes status meanwhile: a 409 reads again


async def test_release_drift_is_shown_and_a_different_model_refuses_a_normal_failover(
    start_workers: StartWorkers, fleet_config_path: Path
) -> None:
    cfg = await start_workers()
    path = write_config(cfg, fleet_config_path.parent)
    proc = await asyncio.to_thread(drctl, "status", "-o", "json", "-c", str(path))
    east = next(r for r in json.loads(proc.stdout)["releases"] if r["region"] == "us-east-1")
    # Earlier tests may leave the regions on different images (upgrades): only the model must agree here.
    assert not east["parity"]["model_differs"] and east["served_models"] == [cfg.workload.model], east
    set_model(cfg, "us-east-1", "fleetsim-other")
    try:

        async def drifted() -> dict[str, Any]:
            p = await asyncio.to_thread(drctl, "status", "-o", "json", "-c", str(path))
            row = next(r for r in json.loads(p.stdout)["releases"] if r["region"] == "us-east-1")
            assert row["served_models"] == ["fleetsim-other"], row
            return row

        row = await assert_eventually(
            drifted, timeout_s=60, interval_s=1, what="us-east-1 serving another model"
        )
        assert row["parity"]["model_differs"] and row["model"] == "fleetsim-other"
        table = await asyncio.to_thread(drctl, "status", "-c", str(path))
        assert "release parity" in table.stdout and "model fleetsim-other in us-east-1" in table.stdout, (
            table.stdout
        )

        refused = await asyncio.to_thread(drctl, "failover", "--to", "us-east-1", "--yes", "-c", str(path))
        assert refused.returncode == 1, refused.stdout + refused.stderr
        out = " ".join(refused.stdout.split())
        assert "serves a different model than us-west-1" in out, out
        assert weights(cfg) == cfg.weights
        # --force gets past the preflight; the verification then meets what the refusal warned of: the
        # target answers the fleet's model with 404, so the failover compensates and traffic stays.
        forced = await asyncio.to_thread(
            drctl, "failover", "--to", "us-east-1", "--yes", "--force", "-o", "json", "-c", str(path)
        )
        res = json.loads(forced.stdout)["result"]
        assert [p["phase"] for p in res["phases"]][-3:] == ["shift", "verify", "compensate"], res["phases"]
        assert (
            res["status"] == "failed" and res["compensated"] == "restored_weights" and "404" in res["error"]
        )
        assert weights(cfg) == cfg.weights
    finally:
        set_model(cfg, "us-east-1", cfg.workload.model)
