"""One behaviour for every command: -o table|json|yaml, --dry-run, --yes, --no-wait and --timeout.

The command tree is walked (tests.support.cli.commands), so a new command that prints an object,
mutates, or starts a workflow fails here until it takes the options the others take. The runs need
no server: a dry run and a refused confirmation stop before anything reaches Temporal, and the
config's Temporal port is closed.
"""

from __future__ import annotations

import io
import json
from enum import EnumMeta
from pathlib import Path

import pytest
import yaml

from tests.support.cli import commands, options_of, run_cli
from tests.support.config import write_fleet_config

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT = str(ROOT / "experiments" / "region-outage.json")

# Commands that print no object a script would read, and why.
NO_OBJECT = {
    ("worker",): "runs the worker process",
    ("eks-token",): "prints an ExecCredential, the one format kubectl's exec plugin reads",
    ("codec-server",): "runs the codec server",
    ("dev", "up"): "starts the dev stack's processes",
    ("dev", "down"): "stops them",
    ("config", "schema"): "prints the JSON Schema or its markdown page (-o json|markdown)",
}
# What a command does decides the options it must take:
# M changes the fleet: --dry-run. C moves traffic, deletes or overwrites: asks first, or --yes.
# W starts a workflow and waits for it: --no-wait and --timeout.
KINDS = {
    ("failover",): "MCW",
    ("failback",): "MCW",
    ("upgrade",): "MCW",
    ("migrate",): "MCW",  # asks with --decommission only
    ("restore",): "MCW",  # asks with --existing-resource-policy update only
    ("drill", "run"): "MCW",
    ("backup", "create"): "MW",
    ("notify", "test"): "W",
    ("backup", "schedule", "create"): "M",
    ("backup", "schedule", "delete"): "MC",
    ("drill", "schedule"): "MC",  # replaces a schedule of the same name; starts production faults
    ("drill", "schedule", "delete"): "MC",
    ("upgrade", "promote"): "C",  # all traffic to the new release
    ("upgrade", "abort"): "C",  # rolls the release back
    ("monitor", "stop"): "C",  # turns automatic failover off
    ("replicate", "stop"): "C",  # turns the RPO's protection off
    ("ops", "abort"): "C",  # a failover not made, an upgrade rolled back, a drill stopped
    ("drill", "schedule", "trigger"): "MC",
}
MUTATING, CONFIRMED, WAITS = ({p for p, k in KINDS.items() if kind in k} for kind in "MCW")


def _choices(option: object) -> list[str]:
    """The values an option takes: Typer (0.29) keeps its Enum on the option's type descriptor."""
    annotation = getattr(getattr(option, "type_descriptor", None), "annotation", None)
    return [str(m.value) for m in annotation] if isinstance(annotation, EnumMeta) else []  # type: ignore[var-annotated]


def test_every_command_that_prints_an_object_takes_output_table_json_yaml() -> None:
    tree = commands()
    assert set(NO_OBJECT) <= set(tree), set(NO_OBJECT) - set(tree)
    missing, wrong = [], []
    for path, cmd in tree.items():
        if path in NO_OBJECT:
            continue
        opts = options_of(cmd)
        if "-o" not in opts or opts["-o"] is not opts.get("--output"):
            missing.append(" ".join(path))
        elif _choices(opts["-o"]) != ["table", "json", "yaml"]:
            wrong.append(" ".join(path))
    assert not missing and not wrong, f"without -o/--output: {missing}; other choices: {wrong}"


@pytest.mark.parametrize(
    ("kind", "paths", "flags"),
    [
        ("mutating", MUTATING, ("--dry-run",)),
        ("confirmed", CONFIRMED, ("--yes", "-y")),
        ("waiting", WAITS, ("--no-wait", "--timeout")),
    ],
)
def test_every_command_of_a_kind_takes_its_options(
    kind: str, paths: set[tuple[str, ...]], flags: tuple[str, ...]
) -> None:
    tree = commands()
    assert paths <= set(tree), paths - set(tree)
    lacking = {" ".join(p): [f for f in flags if f not in options_of(tree[p])] for p in paths}
    assert not any(lacking.values()), f"{kind} commands lacking options: {lacking}"


@pytest.fixture(scope="module")
def config() -> str:
    """A valid config whose every endpoint, Temporal's included, is a closed loopback port."""
    return str(write_fleet_config())


@pytest.fixture
def no_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # as in CI: nobody to answer a prompt


@pytest.mark.usefixtures("no_terminal")
@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["upgrade", "--image", "vllm/vllm-openai:v0.6.4"], "upgrade the fleet"),
        (["migrate", "--from", "us-west-1", "--to", "us-east-1", "--decommission"], "decommission us-west-1"),
        (["restore", "--backup", "b1", "--existing-resource-policy", "update"], "overwrite objects in"),
        (["backup", "schedule", "delete", "every-1h"], "delete schedule every-1h"),
        (["drill", "run", EXPERIMENT], "inject a fault into"),
        (["drill", "schedule", "delete"], "delete drill schedule"),
        (["drill", "schedule", "trigger"], "run a drill of schedule"),
        (["failback"], "change traffic"),
        (["failover", "--to", "us-east-1"], "change traffic"),
        (
            ["drill", "schedule", "--cron", "0 3 * * MON", "-e", EXPERIMENT],
            "create or replace drill schedule",
        ),
        (["upgrade", "promote", "u1"], "promote upgrade/test/u1"),
        (["upgrade", "abort", "u1"], "abort upgrade/test/u1"),
        (["monitor", "stop"], "stop the monitor (automatic failover would be off)"),
        (["replicate", "stop"], "stop replication (replicas would fall behind)"),
        (["ops", "abort", "failover/test"], "abort failover/test"),
    ],
)
def test_without_a_terminal_and_without_yes_it_refuses_in_one_line(
    argv: list[str], what: str, config: str
) -> None:
    code, out, err = run_cli([*argv, "-c", config])
    assert code == 2, (out, err)
    assert err.startswith(f"error: refusing to {what}") and "pass --yes" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err


class _Terminal(io.StringIO):
    """A stdin a person types `answer` into."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    "argv", [["replicate", "stop"], ["ops", "abort", "failover/test"], ["monitor", "stop"]]
)
def test_at_a_terminal_it_asks_and_a_no_changes_nothing(
    argv: list[str], config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Declined: exit 1 "aborted" before Temporal is dialled. Answered yes, or with --yes, the command
    goes on to Temporal, a closed port here: exit 3, so the question is all that stood before it."""
    monkeypatch.setattr("sys.stdin", _Terminal("n\n"))
    code, out, err = run_cli([*argv, "-c", config])
    assert code == 1 and "[y/N]" in out and err.strip() == "aborted", (out, err)
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    code, out, err = run_cli([*argv, "-c", config])
    assert code == 3 and "cannot reach Temporal" in err, (out, err)
    monkeypatch.setattr("sys.stdin", _Terminal(""))  # nobody answers: --yes must not ask
    code, out, err = run_cli([*argv, "--yes", "-c", config])
    assert code == 3 and "[y/N]" not in out and "cannot reach Temporal" in err, (out, err)


def _doc(argv: list[str], output: str) -> dict[str, object]:
    code, out, err = run_cli([*argv, "--dry-run", "-o", output])
    assert code == 0, (out, err)
    loaded = json.loads(out) if output == "json" else yaml.safe_load(out)
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize(
    "argv",
    [
        ["backup", "create", "--name", "b1", "--region", "us-east-1"],
        ["backup", "schedule", "create", "--every", "1h"],
        ["backup", "schedule", "delete", "every-1h"],
        ["drill", "schedule", "delete"],
        ["drill", "run", EXPERIMENT],
        ["failback", "--region", "us-west-1"],
    ],
)
def test_a_dry_run_document_is_the_same_in_json_and_yaml(argv: list[str], config: str) -> None:
    as_json = _doc([*argv, "-c", config], "json")
    assert as_json == _doc([*argv, "-c", config], "yaml")


def test_dry_runs_plan_the_workflow_input_and_reach_no_server(config: str) -> None:
    """Temporal is a closed port here: a dry run that tried to start anything would exit 3."""
    up = _doc(
        ["upgrade", "--image", "vllm/vllm-openai:v0.6.4", "--regions", "us-east-1", "-c", config], "json"
    )
    plan = up["plan"]
    assert up["dry_run"] is True and str(up["workflow_id"]).startswith("upgrade/test/")
    assert isinstance(plan, dict) and plan["regions"] == ["us-east-1"]
    assert plan["release"]["image"] == "vllm/vllm-openai:v0.6.4" and plan["steps_percent"][-1] == 100
    mig = _doc(
        ["migrate", "--from", "us-west-1", "--to", "us-east-1", "--decommission", "-c", config], "yaml"
    )
    assert mig["plan"]["decommission_source"] is True and mig["plan"]["target"] == "us-east-1"  # type: ignore[index]
    rest = _doc(["restore", "--backup", "b1", "--existing-resource-policy", "update", "-c", config], "json")
    assert rest["plan"]["request"]["existing_resource_policy"] == "update"  # type: ignore[index]
    code, out, err = run_cli(["upgrade", "--image", "vllm/vllm-openai:v0.6.4", "--dry-run", "-c", config])
    assert code == 0 and "dry run (nothing started, nothing changed)" in out and "waves" in out, (out, err)


def test_yaml_output_is_the_json_document(config: str) -> None:
    code, as_json, err = run_cli(["config", "validate", config, "-o", "json"])
    assert code == 0, err
    code, as_yaml, err = run_cli(["config", "validate", config, "-o", "yaml"])
    assert code == 0, err
    assert yaml.safe_load(as_yaml) == json.loads(as_json)
