"""Many fleets in one `drctl worker`: the CLI refuses configs that cannot share a process, and a real
worker process serves two fleets, each fleet's activities with its own config."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from drctl.config.schema import load_config
from drctl.worker import logs
from tests.support.cli import run_cli
from tests.support.config import fleet_config_data, short_tmp_dir
from tests.support.http_stub import Reply, Request, StubServer
from tests.support.ports import free_port
from tests.support.temporal import CallVerifyGlobal
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[1]
TEST_QUEUE = f"test-fleets-{uuid.uuid4().hex[:8]}"


def _fleet(
    directory: Path,
    name: str,
    *,
    address: str = "127.0.0.1:7233",
    queues: str | None = None,
    global_endpoint: str | None = None,
) -> Path:
    """A fleet config named `name` whose queues are all `<queues>-...` (default: the fleet's name)."""
    data = fleet_config_data()
    q = queues or name
    data["name"] = name
    data["temporal"] = {**data["temporal"], "address": address, "task_queue": f"{q}-main"}
    for r in data["regions"]:
        r["task_queue"] = f"{q}-{r['name']}"
    if global_endpoint:
        data["traffic"]["global_endpoint"] = global_endpoint
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# --- validation: nothing starts (no Temporal is reachable at these addresses) --------------------


def test_two_fleets_with_the_same_queues_exit_2_naming_both_files() -> None:
    d = short_tmp_dir()
    a, b = _fleet(d, "alpha", queues="shared"), _fleet(d, "beta", queues="shared")
    code, _, err = run_cli(["worker", "--config", str(a), "--config", str(b)])
    assert code == 2, err
    assert "task queue 'shared-main' is used by both" in err and str(a) in err and str(b) in err, err


def test_drctl_config_lists_several_files_separated_by_colons(monkeypatch: pytest.MonkeyPatch) -> None:
    d = short_tmp_dir()
    spaced = d / "with space"
    spaced.mkdir()
    a, b = _fleet(spaced, "alpha", queues="shared"), _fleet(d, "beta", queues="shared")
    monkeypatch.setenv("DRCTL_CONFIG", f"{a}:{b}")
    code, _, err = run_cli(["worker"])
    assert code == 2 and f"used by both {a} and {b}" in err, err


def test_json_log_lines_name_the_fleet_of_the_queue_they_came_from() -> None:
    d = short_tmp_dir()
    a, b = (load_config(_fleet(d, n)) for n in ("alpha", "beta"))
    f = logs.ContextFilter([a, b], None)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    for queue, fleet, region in [
        ("beta-us-east-1", "beta", "us-east-1"),
        ("alpha-main", "alpha", None),
        ("elsewhere", None, None),
    ]:
        record.temporal_activity = {"task_queue": queue, "workflow_id": "monitor/x"}
        f.filter(record)
        assert (record.fleet, record.region, record.operation) == (fleet, region, "monitor"), queue  # type: ignore[attr-defined]
    single = logs.ContextFilter(a, ["us-west-1"])
    record.temporal_activity = {"task_queue": "elsewhere"}
    single.filter(record)
    assert (record.fleet, record.region) == ("alpha", "us-west-1")  # type: ignore[attr-defined]


def test_config_dir_refuses_a_directory_without_configs_and_duplicate_fleet_names() -> None:
    empty = short_tmp_dir()
    code, _, err = run_cli(["worker", "--config-dir", str(empty)])
    assert code == 2 and f"--config-dir {empty}: no *.yaml or *.yml" in err, err
    d = short_tmp_dir()
    a = _fleet(d, "alpha", queues="q1")
    twin = d / "twin.yaml"
    twin.write_text(
        yaml.safe_dump(
            {
                **yaml.safe_load(a.read_text()),
                "temporal": {**yaml.safe_load(a.read_text())["temporal"], "task_queue": "q2-main"},
            }
        )
    )
    code, _, err = run_cli(["worker", "--config-dir", str(d)])
    assert code == 2 and "fleet name 'alpha' is in both" in err and str(twin) in err, err


def test_fleets_on_different_temporal_connections_exit_2() -> None:
    d = short_tmp_dir()
    a, b = _fleet(d, "alpha"), _fleet(d, "beta", address="127.0.0.1:7299")
    code, _, err = run_cli(["worker", "-c", str(a), "-c", str(b), "--region", "us-west-1"])
    assert code == 2 and "different Temporal connections" in err and str(a) in err and str(b) in err, err


# --- one process, two fleets ---------------------------------------------------------------------


class _GlobalEndpoint:
    """Answers every completion at once and counts them: which fleet's config an activity used."""

    def __init__(self) -> None:
        self.hits = 0
        self.server = StubServer(self._answer).start()
        self.url = self.server.url

    def _answer(self, _req: Request) -> Reply:
        self.hits += 1
        return Reply(200, {"choices": [{"text": "ok"}]})


@pytest.fixture
def endpoints() -> Iterator[list[_GlobalEndpoint]]:
    eps = [_GlobalEndpoint(), _GlobalEndpoint()]
    yield eps
    for e in eps:
        e.server.close()


VERIFY = {"requests": 2, "timeout_s": 20, "request_timeout_s": 10}


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - loopback URL built here
        return str(resp.read().decode())


async def test_one_process_serves_two_fleets_each_with_its_own_config(
    temporal_env: WorkflowEnvironment, endpoints: list[_GlobalEndpoint]
) -> None:
    d = short_tmp_dir()
    address = temporal_env.client.service_client.config.target_host
    tag = uuid.uuid4().hex[:6]
    for name, ep in zip(("alpha", "beta"), endpoints, strict=True):
        _fleet(d, name, address=address, queues=f"{name}-{tag}", global_endpoint=ep.url)
    port = free_port()
    proc = _worker_process(["--config-dir", str(d), "--http-port", str(port)])
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or []), daemon=True)
    reader.start()
    try:
        ready: Any = await asyncio.to_thread(
            wait_until,
            lambda: proc.poll() is not None or "ready:" in _try_get(f"http://127.0.0.1:{port}/readyz"),
            30,
            0.2,
            "worker readyz",
        )
        assert proc.poll() is None and ready, "".join(lines)
        body = _get(f"http://127.0.0.1:{port}/readyz")
        for name in ("alpha", "beta"):
            for q in ("main", "us-west-1", "us-east-1"):
                assert f"{name}-{tag}-{q}" in body, body
        async with Worker(temporal_env.client, task_queue=TEST_QUEUE, workflows=[CallVerifyGlobal]):
            for name, ep in zip(("alpha", "beta"), endpoints, strict=True):
                before = [e.hits for e in endpoints]
                call = {"queue": f"{name}-{tag}-us-east-1", "input": VERIFY, "start_to_close_s": 30}
                result = await temporal_env.client.execute_workflow(
                    CallVerifyGlobal.run, call, id=f"verify/{name}-{tag}", task_queue=TEST_QUEUE
                )
                assert result["ok"] == 2, result
                # Only this fleet's global endpoint was asked: the activity ran with its fleet's config.
                assert [e.hits - b for e, b in zip(endpoints, before, strict=True)] == (
                    [2, 0] if ep is endpoints[0] else [0, 2]
                )
        metrics = _get(f"http://127.0.0.1:{port}/metrics")
        assert 'fleet="alpha"' in metrics and 'fleet="beta"' in metrics
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.wait, 20)
        reader.join(5)
    served = [ln for ln in lines if "serving task queues" in ln]
    assert any("'alpha'" in ln for ln in served) and any("'beta'" in ln for ln in served), "".join(lines)


def _worker_process(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "drctl", "worker", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )


def _try_get(url: str) -> str:
    try:
        return _get(url)
    except OSError:
        return ""
