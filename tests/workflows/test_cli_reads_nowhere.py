"""Every CLI read with nothing but Temporal reachable: the workers read, the CLI asks and renders.

The CLI runs in a network namespace of its own that reaches only Temporal (tests/support/netns.py),
with a config whose every other endpoint points nowhere (closed loopback ports, missing sockets);
the in-process workers have the real config. What the CLI prints is then checked against the fleet
itself, read here directly. Then the failures: a region without a worker, a main queue without
one, a worker that died a moment ago, weights that differ from the config, Temporal down.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import pytest_asyncio
from temporalio.client import Client

from drctl.config.schema import FleetConfig
from drctl.models.reads import NO_WORKER, ReadInput, ReadPart, ReadResult
from drctl.providers.drill_reports import ReportStore
from drctl.providers.haproxy_runtime import HAProxyRuntime
from drctl.providers.velero import VeleroBackupProvider
from drctl.providers.velero_schedule import VeleroSchedules
from tests.support.builders import drill_report
from tests.support.cli import drctl_async
from tests.support.config import nowhere_config, short_tmp_dir, write_config
from tests.support.netns import temporal_bridge, unshared
from tests.support.ports import free_port
from tests.support.workers import StartWorkers, replicas, weights

pytestmark = [pytest.mark.slow, pytest.mark.devstack]

Run = tuple[int, str, str]


@pytest_asyncio.fixture(loop_scope="session")
async def offline(fleet_config: FleetConfig) -> AsyncIterator[list[str]]:
    """The command prefix that runs the CLI where only Temporal answers."""
    directory = short_tmp_dir("drctl-netns-")
    sock = directory / "temporal.sock"
    async with temporal_bridge(sock, fleet_config.temporal.address):
        yield unshared(sock, fleet_config.temporal.address)


def _away(cfg: FleetConfig) -> str:
    directory = short_tmp_dir("drctl-away-")
    return str(write_config(nowhere_config(cfg, directory), directory))


async def test_every_read_works_with_only_temporal_reachable(
    start_workers: StartWorkers, offline: list[str], fleet_config_path: Path
) -> None:
    cfg = await start_workers(probe_timeout_s=2.0, interval_s=3.0)
    away = _away(cfg)
    real = str(write_config(cfg, fleet_config_path.parent))

    async def run(*args: str, config: str = away) -> Run:
        return await drctl_async(*args, "-c", config, via=offline if config == away else None, timeout_s=120)

    # The namespace really is cut off: the stack's Kubernetes API does not answer in it.
    kube = cfg.regions[0].kube.api_url or ""
    probe = await asyncio.create_subprocess_exec(
        *offline,
        "python3",
        "-c",
        f"import urllib.request as u; u.urlopen({kube!r}, timeout=2)",
        stderr=asyncio.subprocess.PIPE,
    )
    _, cut = await asyncio.wait_for(probe.communicate(), 30)
    assert probe.returncode != 0 and b"Connection refused" in cut, cut

    code, out, err = await run("status", "-o", "json")
    assert code == 0, (out, err)
    st = json.loads(out)
    assert {n: r["weight"] for n, r in st["regions"].items()} == weights(cfg) == cfg.weights
    for name in cfg.region_names:
        reg = st["regions"][name]
        assert reg["replicas"]["replicas"] == replicas(cfg, name) and reg["probe"]["status"] == "HEALTHY", reg
    assert st["problems"] == [] and "read_error" not in st, st
    assert all(r.get("error") is None for r in st["releases"]), st["releases"]
    assert [r["bucket"] for r in st["replication"]] == ["models", "state"]
    code, out, err = await run("status")
    assert code == 0 and "fleet OK" in out and "us-east-1" in out, (out, err)
    # Without a terminal, --watch prints a block per change (at least the first), until --timeout.
    code, out, err = await drctl_async(
        "status", "--watch", "--timeout", "10", "--interval", "2", "-c", away, via=offline, timeout_s=60
    )
    assert code == 0 and 1 <= out.count("\n--- ") + out.startswith("--- ") <= 3 and "fleet OK" in out, (
        out,
        err,
    )

    # The dry run is the failover's own preflight and planner, on the workers.
    code, out, err = await run("failover", "--to", "us-east-1", "--dry-run", "-o", "json")
    assert code == 0, err
    plan = json.loads(out)["plan"]
    assert plan["weights_after"] == {"us-west-1": 0, "us-east-1": 100} and plan["problems"] == []
    assert plan["target_replicas_before"] == replicas(cfg, "us-east-1")
    assert await run("failover", "--to", "us-east-1", "--dry-run", "-o", "json", config=real) == (
        code,
        out,
        err,
    )
    assert weights(cfg) == cfg.weights  # a plan changes nothing

    name = f"reads-{uuid.uuid4().hex[:6]}"
    code, out, err = await run("backup", "create", "--name", name, "--region", "us-east-1", "-o", "json")
    assert code == 0, (out, err)
    code, out, err = await run("backup", "list", "--region", "us-east-1", "-o", "json")
    assert code == 0, err
    listed = json.loads(out)
    truth = VeleroBackupProvider(cfg, "us-east-1").list_backups()
    assert [b["name"] for b in listed] == [b.name for b in truth] and name in [b["name"] for b in listed]
    code, out, err = await run("backup", "describe", name, "--region", "us-east-1", "-o", "json")
    assert code == 0 and json.loads(out)["phase"] == "Completed", (out, err)
    code, out, err = await run("backup", "describe", f"{name}-nosuch", "--region", "us-east-1")
    assert code == 2 and f"no backup '{name}-nosuch' in us-east-1" in err and "Traceback" not in err, err
    again = await run("backup", "create", "--name", name, "--region", "us-east-1")
    assert again[0] == 2 and "already exists" in again[2], again

    code, out, err = await run("backup", "schedule", "list", "-o", "json")
    assert code == 0, err
    want = [s.model_dump(mode="json") for r in cfg.region_names for s in VeleroSchedules(cfg, r).list()]
    assert json.loads(out) == want

    # Schedules are written by each region's worker (BackupScheduleChange), not by the CLI.
    sched = f"nowhere-{uuid.uuid4().hex[:6]}"
    code, out, err = await run("backup", "schedule", "create", "--every", "1h", "--name", sched, "-o", "json")
    assert code == 0 and {s["region"] for s in json.loads(out)} == set(cfg.region_names), (out, err)
    assert all(sched in [s.name for s in VeleroSchedules(cfg, r).list()] for r in cfg.region_names)
    code, out, err = await run("backup", "schedule", "delete", sched, "--yes")
    assert code == 0 and f"schedule {sched} deleted in us-east-1" in out, (out, err)
    assert all(sched not in [s.name for s in VeleroSchedules(cfg, r).list()] for r in cfg.region_names)

    report = drill_report(
        id=f"drill/{cfg.name}/reads{uuid.uuid4().hex[:8]}", fleet=cfg.name, at=datetime.now(UTC)
    )
    ReportStore(cfg).put(report)
    code, out, err = await run("drill", "history", "-o", "json")
    assert code == 0 and report.id in [r["id"] for r in json.loads(out)], (out, err)
    code, out, err = await run("drill", "report", report.id, "-o", "json")
    assert code == 0 and json.loads(out)["id"] == report.id, err
    code, out, err = await run("drill", "report", f"drill/{cfg.name}/nosuch")
    assert code == 2 and "no report for" in err, err

    # The reads took no fleet lock and are no operations: `ops list --all` shows none of them.
    code, out, err = await run("ops", "list", "--all", "-o", "json")
    assert code == 0 and not [o for o in json.loads(out) if o["workflow_id"].startswith("read/")], out

    # The 3 a.m. commands themselves: a failover and its failback, from where only Temporal answers.
    code, out, err = await run("failover", "--to", "us-east-1", "--yes", "-o", "json")
    assert code == 0 and json.loads(out)["result"]["status"] == "succeeded", (out, err)
    assert weights(cfg) == {"us-west-1": 0, "us-east-1": 100}
    code, out, err = await run("failback", "--yes", "-o", "json")
    assert code == 0 and json.loads(out)["result"]["status"] == "succeeded", (out, err)
    assert weights(cfg) == cfg.weights

    # Replication is a workflow; its status a query: Temporal alone, from start to status.
    code, out, err = await run("replicate", "start", "-o", "json")
    assert code == 0 and json.loads(out)["started"] is True, (out, err)

    async def replicated() -> Run | None:
        got = await run("replicate", "status", "-o", "json")
        return got if got[0] == 0 and all(p["runs"] >= 1 for p in json.loads(got[1])["pairs"]) else None

    for _ in range(60):
        if (got := await replicated()) is not None:
            break
        await asyncio.sleep(1)
    else:
        pytest.fail("replication never reported a run of every pair")
    assert [p["pair"]["bucket"] for p in json.loads(got[1])["pairs"]] == ["models", "state"]


async def test_missing_workers_and_a_drifted_fleet_exit_non_zero(
    start_workers: StartWorkers, offline: list[str], temporal_client: Client
) -> None:
    cfg = await start_workers(["us-west-1"], probe_timeout_s=2.0, interval_s=3.0)
    away = _away(cfg)
    east = cfg.region("us-east-1").queue

    async def run(*args: str, config: str = away) -> Run:
        return await drctl_async(*args, "-c", config, via=offline, timeout_s=120)

    code, out, err = await run("status", "-o", "json")
    assert code == 1, (out, err)
    st = json.loads(out)
    assert st["regions"]["us-east-1"]["replicas"] == {"error": f"no worker polling {east}"}
    assert st["regions"]["us-west-1"]["replicas"]["replicas"] == replicas(cfg, "us-west-1")
    assert any(f"no worker polling {east}" in p for p in st["problems"]), st["problems"]
    code, out, err = await run("status")
    assert code == 1 and f"no worker polling {east}" in out and "NOT OK" in out, (out, err)
    for argv in (["backup", "list", "--region", "us-east-1"], ["failover", "--to", "us-east-1", "--dry-run"]):
        code, out, err = await run(*argv)
        assert code == 3 and err.strip() == f"error: no worker polling {east}", (argv, out, err)

    # A worker that died a moment ago is still listed as a poller, so the CLI cannot tell; the read
    # itself, told nothing by the CLI, names the unserved queue when its schedule-to-start runs out.
    res = await temporal_client.execute_workflow(
        "FleetRead",
        ReadInput(
            fleet=cfg.name, what="backups", queues={"us-east-1": east}, regions=["us-east-1"], queue_wait_s=2
        ),
        id=f"read/{cfg.name}/{uuid.uuid4().hex[:12]}",
        task_queue=cfg.temporal.task_queue,
        result_type=ReadResult,
        execution_timeout=timedelta(seconds=30),
    )
    assert res.parts["backups/us-east-1"] == ReadPart(
        error=f"no worker polling {east}", kind=NO_WORKER, queue=east
    )

    # Weights that differ from the config are a failing status, named.
    runtime = HAProxyRuntime(cfg.traffic.global_tier.runtime_socket)  # type: ignore[union-attr]
    runtime.set_weight(cfg.traffic.global_tier.backend, "us-west-1", 30)  # type: ignore[union-attr]
    assert weights(cfg)["us-west-1"] == 30
    code, out, err = await run("status", "-o", "json")
    assert code == 1 and any("differ from the config" in p for p in json.loads(out)["problems"]), out

    # Nobody serves the main queue: nothing could read, said in one line.
    lone = cfg.model_copy(
        update={"temporal": cfg.temporal.model_copy(update={"task_queue": f"nobody-{uuid.uuid4().hex[:6]}"})}
    )
    directory = short_tmp_dir("drctl-away-")
    code, out, err = await run("status", config=str(write_config(nowhere_config(lone, directory), directory)))
    assert code == 3 and "read error: no worker polling nobody-" in out, (out, err)

    down = cfg.model_copy(
        update={"temporal": cfg.temporal.model_copy(update={"address": f"127.0.0.1:{free_port()}"})}
    )
    code, out, err = await drctl_async("status", "-c", str(write_config(down, directory)))
    assert code == 3 and "cannot reach Temporal" in err and "Traceback" not in err and err.count("\n") == 1, (
        err
    )
