"""docs/supported-versions.md: every command it shows is run, and every version it prints in bold
is in the output of its row's commands, so the table cannot drift from what is installed here."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from drctl.config.schema import FleetConfig

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "supported-versions.md"
COMPONENTS = {
    "Kubernetes", "Gateway API", "Velero", "HAProxy", "vLLM", "Temporal server", "Chaos Toolkit", "rclone",
}  # fmt: skip


def _rows() -> list[list[str]]:
    rows = []
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 4 and cells[0] not in ("Component", "---"):
            rows.append(cells)
    return rows


@functools.cache
def _output(command: str) -> str:
    done = subprocess.run(shlex.split(command), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{command!r} exited {done.returncode}: {done.stdout}{done.stderr}"
    return done.stdout + done.stderr


def test_table_names_every_component() -> None:
    rows = _rows()
    assert COMPONENTS <= {r[0] for r in rows}
    assert all(r[1] and r[2] for r in rows)


@pytest.mark.parametrize("row", [pytest.param(r, id=r[0]) for r in _rows() if "`" in r[3]])
def test_each_rows_commands_print_its_versions_in_bold(row: list[str]) -> None:
    _component, tested, _how, command = row
    commands = re.findall(r"`([^`]+)`", command)
    for cmd in commands:
        # Resolved from the repository root, as the page says: ../shared is beside the clone.
        binary = ROOT / shlex.split(cmd)[0]
        if cmd.startswith("../shared/") and not binary.exists():
            pytest.skip(f"{binary.resolve()} is not here (a user's clone has no ../shared/tools)")
    said = "".join(_output(c) for c in commands)
    versions = re.findall(r"\*\*([^*]+)\*\*", tested)
    assert versions, "a row with a command bolds the versions it prints"
    missing = [v for v in versions if v not in said]
    assert not missing, f"{commands} do not print {missing}:\n{said}"


# --- "Time and credentials, per stand-in" ---------------------------------------------------------

STANDINS = {
    "Deployment controller", "Gateway API controller", "Velero agent", "fleetsim", "S3, STS and Route 53",
    "Route 53 change propagation",
}  # fmt: skip


def _standin_rows() -> list[list[str]]:
    """The five-column rows of the section: stand-in, time, credentials, settings, tests."""
    text = DOC.read_text().split("## Time and credentials, per stand-in", 1)[1]
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 5 and cells[0] not in ("Stand-in", "---"):
            rows.append(cells)
    return rows


def _models(annotation: object) -> list[type[BaseModel]]:
    """The config models an annotation holds (a model, or the members of a union or list of them)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models(a)]


def _field(path: str) -> FieldInfo:
    """The config field a dotted YAML path names (`traffic.global.ttl_s`), through unions."""
    models: list[type[BaseModel]] = [FleetConfig]
    found: FieldInfo | None = None
    for part in path.split("."):
        found = next((f for m in models for n, f in m.model_fields.items() if part in (n, f.alias)), None)
        assert found is not None, f"{path}: no config field {part!r}"
        models = _models(found.annotation)
    assert found is not None
    return found


def test_every_stand_in_says_what_it_does_in_time_and_credentials() -> None:
    rows = _standin_rows()
    assert {next(s for s in STANDINS if r[0].startswith(s)) for r in rows} == STANDINS
    assert all(r[1] and r[2] for r in rows)


@pytest.mark.parametrize("row", [pytest.param(r, id=r[0].split(" (")[0]) for r in _standin_rows()])
def test_each_stand_in_rows_defaults_settings_files_and_tests_are_real(row: list[str]) -> None:
    _standin, time, credentials, settings, tests = row
    said = " ".join(row)
    # A default the row states is the config's default.
    for path, value in re.findall(r"`([a-z_]+\.[a-z_.]+)` \(default ([\d.]+) s", f"{time} {credentials}"):
        assert _field(path).default == float(value), f"{path}: the config's default is not {value}"
    for name in re.findall(r"`([^`]+)`", settings):
        if name.isupper():  # an environment variable: the stand-in reads it
            assert name in "".join(p.read_text() for p in (ROOT / "drctl" / "devstack").glob("*.py")), name
        else:
            _field(name)
    for path in re.findall(r"`((?:drctl|tests)/[\w/]+\.py)`", said):
        assert (ROOT / path).is_file(), path
    assert re.findall(r"`(tests/[\w/]+\.py)`", tests), "each row names the tests that keep it true"


def test_the_dev_stacks_aws_endpoint_is_the_signature_checker() -> None:
    """The S3 row says the stack's AWS endpoint demands session tokens: its moto component is the checker."""
    from drctl.config.schema import load_config
    from drctl.devstack import stack

    path = ROOT / "config" / "fleet.yaml"
    comps = {c.name: c for c in stack.components(load_config(path), path, workers=True)}
    assert "drctl.devstack.s3_auth_proxy" in comps["moto"].argv
    assert "`drctl/devstack/s3_auth_proxy.py`" in next(r for r in _standin_rows() if r[0].startswith("S3"))[0]
