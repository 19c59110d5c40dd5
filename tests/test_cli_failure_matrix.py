"""No tracebacks: every command, with Temporal down, with no worker polling, and with a broken config.

Each command runs in-process (tests.support.cli.run_cli: an unexpected exception propagates, which
is the traceback a user would see) with the minimal arguments it needs. The exit codes asserted are
the documented ones (README "Exit codes", `drctl --help`). The commands are the walked command
tree, so a new command fails here until it is given its arguments.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from drctl.models.breakglass import BreakGlassRecord
from tests.support.cli import cli, commands, run_cli
from tests.support.config import short_tmp_dir, write_fleet_config
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[1]
EXP = str(ROOT / "experiments" / "region-outage.json")
WAIT = ["--timeout", "1"]  # a command that waits gives up after a second: exit 4, still running

# Commands left out, and why.
LEFT_OUT = {
    ("worker",): "runs until stopped; tests/test_worker_process.py covers its start-up failures",
    ("dev", "up"): "starts the dev stack's processes (tests/devstack)",
    ("dev", "down"): "stops them",
    ("codec-server",): "serves until stopped",
    ("eks-token",): "reads no config and no Temporal: AWS credentials only",
    ("config", "schema"): "reads no config and no Temporal",
    # The user's contexts file, not a fleet's config or Temporal: tests/units/test_cli_contexts.py.
    ("config", "get-contexts"): "reads the contexts file only",
    ("config", "use-context"): "writes the contexts file only",
    ("config", "set-context"): "writes the contexts file, after loading the config it names",
}

# The minimal arguments of every other command (the config is added as -c).
ARGS: dict[tuple[str, ...], list[str]] = {
    ("failover",): ["--to", "us-east-1", "--yes", *WAIT],
    ("failback",): ["--yes", *WAIT],
    ("config", "validate"): [],  # takes the file as its argument (added below)
    ("backup", "create"): ["--name", "b1", *WAIT],
    ("backup", "list"): [],
    ("backup", "describe"): ["b1"],
    ("backup", "schedule", "create"): ["--every", "1h"],
    ("backup", "schedule", "list"): [],
    ("backup", "schedule", "delete"): ["every-1h", "--yes"],
    ("upgrade",): ["--image", "vllm/vllm-openai:v0.6.4", "--yes", *WAIT],
    ("upgrade", "promote"): ["u1", "--yes"],
    ("upgrade", "abort"): ["u1", "--yes"],
    ("upgrade", "pause"): ["u1"],
    ("upgrade", "resume"): ["u1"],
    ("upgrade", "status"): ["u1"],
    ("dev", "status"): [],
    ("monitor", "start"): [],
    ("monitor", "stop"): ["--yes"],
    ("monitor", "status"): [],
    ("monitor", "decisions"): [],
    ("ops", "list"): [],
    ("ops", "show"): ["failover/nope"],
    ("ops", "watch"): ["failover/nope", *WAIT],
    ("ops", "approve"): ["failover/nope"],
    ("ops", "abort"): ["failover/nope", "--yes"],
    ("ops", "reject"): ["failover/nope"],
    ("drill", "run"): [EXP, "--yes", *WAIT],
    ("drill", "validate"): [EXP],
    ("drill", "history"): [],
    ("drill", "report"): ["drill/test/nope"],
    ("drill", "schedule"): ["--cron", "0 3 * * MON", "-e", EXP, "--yes"],
    ("drill", "schedule", "list"): [],
    ("drill", "schedule", "pause"): [],
    ("drill", "schedule", "resume"): [],
    ("drill", "schedule", "delete"): ["--yes"],
    ("drill", "schedule", "trigger"): ["--yes"],
    ("notify", "test"): [*WAIT],
    ("restore",): ["--backup", "b1", *WAIT],
    ("status",): [],
    ("migrate",): ["--from", "us-west-1", "--to", "us-east-1", *WAIT],
    ("replicate", "start"): [],
    ("replicate", "stop"): ["--yes"],
    ("replicate", "status"): [],
    ("failover-import",): ["RECORD", *WAIT],  # RECORD: a break-glass record of the config's fleet
}

DOCUMENTED = {0, 1, 2, 3, 4}


def _argv(path: tuple[str, ...], config: str) -> list[str]:
    if path == ("config", "validate"):
        return ["config", "validate", config]
    args = [_record(config) if a == "RECORD" else a for a in ARGS[path]]
    return [*path, *args, "-c", config]


def _record(config: str) -> str:
    """A break-glass audit record of the fleet `config` names (or of fleet test, for a broken
    config), saved beside it as `drctl failover --break-glass` prints it."""
    import yaml

    try:
        fleet = yaml.safe_load(Path(config).read_text())["name"]
    except (OSError, yaml.YAMLError, KeyError, TypeError):
        fleet = "test"
    now = datetime.now(UTC)
    rec = BreakGlassRecord(
        id=f"{fleet}/{now:%Y%m%dT%H%M%S%fZ}",
        fleet=fleet,
        who="matrix@test",
        host="localhost",
        started_at=now,
        finished_at=now,
        source="us-west-1",
        target="us-east-1",
        forced=True,
        status="succeeded",
        temporal="127.0.0.1:1 refused",
        weights_before={"us-west-1": 60, "us-east-1": 40},
        weights_after={"us-west-1": 0, "us-east-1": 100},
    )
    path = short_tmp_dir("drctl-record-") / "record.json"
    path.write_text(rec.model_dump_json())
    return str(path)


def _config(temporal: str | None = None, name: str = "test") -> str:
    """A valid config, every non-Temporal endpoint a closed loopback port; Temporal at `temporal`
    (default: a closed port too). A webhook, so `notify test` has one to send to."""
    over: dict[str, Any] = {
        "name": name,
        "notifications": {"webhooks": [{"name": "ops", "url": f"http://127.0.0.1:{free_port()}/hook"}]},
    }
    if temporal:
        over["temporal"] = {"address": temporal, "task_queue": f"nobody-{uuid.uuid4().hex[:8]}"}
    return str(write_fleet_config(overrides=over))


def _one_line_error(code: int, out: str, err: str, what: str) -> None:
    assert "Traceback" not in out + err, (what, out, err)
    assert code in DOCUMENTED and code != 0, (what, code, out, err)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, (what, err)


def test_every_command_has_its_arguments_here() -> None:
    tree = set(commands())
    assert tree - set(LEFT_OUT) == set(ARGS), (tree - set(LEFT_OUT)) ^ set(ARGS)


# With Temporal a closed port, 3 (Temporal unreachable) for every command that needs Temporal.
# These need none: the config and experiment checks, and the dev stack's local pids.
TEMPORAL_DOWN_OK = {("config", "validate"), ("drill", "validate"), ("dev", "status")}


@pytest.mark.parametrize("path", sorted(ARGS), ids=" ".join)
def test_temporal_down(path: tuple[str, ...]) -> None:
    code, out, err = run_cli(_argv(path, _config()))
    assert "Traceback" not in out + err, (code, out, err)
    if path in TEMPORAL_DOWN_OK:
        assert code == 0, (code, out, err)
        return
    _one_line_error(code, out, err, " ".join(path))
    assert code == 3 and "cannot reach Temporal at 127.0.0.1:" in err, (code, err)


# Broken configs: every command names the file and the problem, exit 2.
BROKEN = {
    "syntax error": ("name: test\nregions: [\n", "fleet.yaml"),
    "unknown field": (None, "no_such_field"),
    "missing file": ("", "no-such-dir"),
}


@pytest.fixture(scope="module")
def broken_configs() -> dict[str, str]:
    work = short_tmp_dir("drctl-broken-")
    syntax = work / "fleet.yaml"
    syntax.write_text(BROKEN["syntax error"][0] or "")
    good = Path(write_fleet_config())
    unknown = work / "unknown.yaml"
    unknown.write_text(good.read_text() + "no_such_field: 1\n")
    return {
        "syntax error": str(syntax),
        "unknown field": str(unknown),
        "missing file": str(work / "no-such-dir" / "fleet.yaml"),
    }


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_broken_config(broken: str, broken_configs: dict[str, str]) -> None:
    failures = []
    for path in sorted(ARGS):
        code, out, err = run_cli(_argv(path, broken_configs[broken]))
        named = BROKEN[broken][1] in err
        if code != 2 or "Traceback" in out + err or len(err.strip().splitlines()) != 1 or not named:
            failures.append(f"{' '.join(path)}: exit {code}, stderr {err.strip()!r}")
    assert not failures, "\n".join(failures)


# With Temporal up and no worker polling any queue: what each command ends with.
NO_WORKER: dict[tuple[str, ...], int] = {
    **dict.fromkeys(
        [
            ("failover",),
            ("failback",),
            ("upgrade",),
            ("migrate",),
            ("restore",),
            ("drill", "run"),
            ("notify", "test"),
        ],
        4,  # started; nobody runs it; the wait ends after --timeout, the operation does not
    ),
}


@pytest.mark.parametrize("path", sorted(ARGS), ids=" ".join)
async def test_no_worker_polling(path: tuple[str, ...], temporal_env: WorkflowEnvironment) -> None:
    address = temporal_env.client.service_client.config.target_host
    # A fleet of its own per command: an operation left running must not make the next one busy.
    config = _config(address, name=f"m{uuid.uuid4().hex[:6]}")
    code, out, err = await cli(*_argv(path, config))
    assert "Traceback" not in out + err, (code, out, err)
    assert code in DOCUMENTED, (code, out, err)
    if path in NO_WORKER:
        assert code == NO_WORKER[path], (code, out, err)
        follow = "show" if path == ("notify", "test") else "watch"  # notify has no phases to watch
        assert f"is still running after 1 s; follow it with `drctl ops {follow} " in err, err
    if path == ("status",):  # its report says what it could not read, on stdout (NOT OK), exit 3
        assert code == 3 and "no worker polling" in out, (code, out, err)
    elif code != 0:
        _one_line_error(code, out, err, " ".join(path))
