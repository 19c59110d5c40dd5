"""Broken experiment files: `drctl drill run` refuses each with exit 2 before any fault is sent."""

from __future__ import annotations

import copy
import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from drctl.chaos.validate import validate_experiment
from drctl.config.schema import load_config
from tests.support.admin_recorder import OUTAGE
from tests.support.cli import DRCTL
from tests.support.config import drill_config, short_tmp_dir

REPO = Path(__file__).resolve().parents[2]


class _TemporalDoor:
    """Stands where the Temporal frontend would be and records every connection to it.

    `drctl drill run` connects to Temporal only to start the drill, after the experiment passed
    validation: a connection here means an experiment got past validation. (With no server the
    CLI then fails with exit 3, so the exit code alone would not say how far it got.)
    """

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.knocks = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.knocks += 1
            conn.close()

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone does not
        except OSError:
            pass
        self.sock.close()
        self._thread.join(timeout=5)


@pytest.fixture
def temporal_door() -> Iterator[_TemporalDoor]:
    door = _TemporalDoor()
    yield door
    door.close()


def _mutate(fn: Any) -> dict[str, Any]:
    exp = copy.deepcopy(OUTAGE)
    fn(exp)
    return exp


def _action(exp: dict[str, Any]) -> dict[str, Any]:
    return exp["method"][0]


# name → (file content or experiment, which config, expected words in the error)
CASES: dict[str, tuple[Any, str, str]] = {
    "json-syntax.json": ('{"title": "x",\n  "method": [', "both", "JSON syntax error at line 2"),
    "yaml-syntax.yaml": ("title: [unclosed\nmethod: {", "both", "YAML syntax error"),
    "not-a-mapping.json": ("[1, 2, 3]", "both", "must be a mapping"),
    "missing-method.json": (_mutate(lambda e: e.pop("method")), "both", "missing required key(s): method"),
    "no-rollbacks.json": (_mutate(lambda e: e.update(rollbacks=[])), "both", "rollbacks are required"),
    "no-expectation.json": (_mutate(lambda e: e.pop("extensions")), "both", "expect_failover"),
    "unknown-module.json": (
        _mutate(lambda e: _action(e)["provider"].update(module="drctl.chaos.nope")),
        "both",
        "python module 'drctl.chaos.nope' is not allowed",
    ),
    "unknown-func.json": (
        _mutate(lambda e: _action(e)["provider"].update(func="explode")),
        "both",
        "drctl.chaos.actions.explode is not one of drctl's drill functions",
    ),
    "bad-argument.json": (
        _mutate(lambda e: _action(e)["provider"]["arguments"].update(regoin="x")),
        "both",
        "regoin",
    ),
    "bad-tolerance.json": (
        _mutate(
            lambda e: e["steady-state-hypothesis"]["probes"][0].update(
                tolerance={"type": "range", "range": [1]}
            )
        ),
        "both",
        "not a valid Chaos Toolkit experiment",
    ),
    "foreign-action.json": (
        _mutate(
            lambda e: e["method"].insert(
                0, {"type": "action", "name": "rm", "provider": {"type": "process", "path": "true"}}
            )
        ),
        "both",
        "provider type 'process' is not allowed",
    ),
    "unknown-region.json": (
        _mutate(lambda e: _action(e)["provider"]["arguments"].update(region="mars-1")),
        "both",
        "unknown region 'mars-1'",
    ),
    "target-not-allowed.json": (OUTAGE, "east-only", "'us-west-1' is not an allowed drill target"),
    "devstack-only-fault.json": (
        json.loads((REPO / "experiments" / "gateway-loss.json").read_text()),
        "kube",
        "kill_gateway needs drills.fault_injector devstack",
    ),
}


def _drill_run(experiment: Path, config: Path) -> list[str]:
    """`drctl drill run EXPERIMENT -c CONFIG`, as a user types it."""
    return [str(DRCTL), "drill", "run", str(experiment), "--yes", "-c", str(config)]


def test_each_broken_experiment_exits_2_before_any_fault(
    admin_recorder: str, temporal_door: _TemporalDoor
) -> None:
    work = short_tmp_dir("drctl-val-")
    configs = {
        "both": drill_config(
            work, admin_recorder, ["us-west-1", "us-east-1"], temporal=temporal_door.address
        ),
        "east-only": drill_config(work, admin_recorder, ["us-east-1"], temporal=temporal_door.address),
        "kube": drill_config(
            work, admin_recorder, ["us-west-1", "us-east-1"], "kubernetes", temporal=temporal_door.address
        ),
    }
    # The control: the same command on a valid experiment gets as far as Temporal, so the door
    # does see an experiment that passed validation.
    control_door = _TemporalDoor()
    control_cfg = drill_config(
        work, admin_recorder, ["us-west-1", "us-east-1"], "devstack", temporal=control_door.address
    )
    control = subprocess.Popen(
        _drill_run(REPO / "experiments" / "region-outage.json", control_cfg),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs = {}
    for name, (content, cfg, _) in CASES.items():
        path = work / name
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        # Not a dry run: a valid experiment here would really be started.
        procs[name] = subprocess.Popen(
            _drill_run(path, configs[cfg]),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    failures = []
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        expected = CASES[name][2]
        if proc.returncode != 2 or expected not in err or "Traceback" in err:
            failures.append(f"{name}: exit {proc.returncode}, stderr {err.strip()!r}")
    _, control_err = control.communicate(timeout=60)
    control_door.close()
    assert not failures, "\n".join(failures)
    assert temporal_door.knocks == 0, (
        "a broken experiment got past validation: drctl went on to start the drill"
    )
    assert control.returncode == 3 and control_door.knocks >= 1, (control.returncode, control_err)


def test_shipped_experiments_are_valid_and_say_what_they_expect(tmp_path: Path, admin_recorder: str) -> None:
    cfg = load_config(drill_config(tmp_path, admin_recorder, ["us-west-1", "us-east-1"]))
    expect = {"region-outage": True, "region-degradation": True, "gateway-loss": True, "replica-loss": False}
    for name, failover in expect.items():
        plan = validate_experiment(REPO / "experiments" / f"{name}.json", cfg, target="us-east-1")
        assert plan.expect_failover is failover
        assert plan.target_region == "us-east-1"
        assert plan.configuration["fleet_config"] == str(Path(cfg.source_path or "").resolve())
        assert plan.rollbacks == ["clear-target-region-faults"]


def test_dry_run_prints_the_plan_and_injects_nothing(
    tmp_path: Path, admin_recorder: str, temporal_door: _TemporalDoor
) -> None:
    cfg = drill_config(tmp_path, admin_recorder, ["us-west-1", "us-east-1"], temporal=temporal_door.address)
    proc = subprocess.run(
        [
            str(DRCTL),
            "drill",
            "run",
            str(REPO / "experiments" / "region-outage.json"),
            "--dry-run",
            "-c",
            str(cfg),
            "--target",
            "us-east-1",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "nothing is injected" in proc.stdout and "us-east-1" in proc.stdout
    assert "kill-all-target-region-replicas" in proc.stdout
    # A dry run starts nothing: it never even connects to Temporal.
    assert temporal_door.knocks == 0
