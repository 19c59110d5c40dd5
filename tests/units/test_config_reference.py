"""The config reference cannot drift: the committed schema and page are what the models generate."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from drctl.config import reference
from tests.support.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "config").glob("*.yaml"))


def test_committed_schema_is_what_the_models_generate() -> None:
    committed = (ROOT / "docs" / "fleet-config.schema.json").read_text()
    assert committed == reference.schema_text(), (
        "regenerate: drctl config schema > docs/fleet-config.schema.json"
    )


def test_committed_reference_page_is_what_the_schema_generates() -> None:
    committed = (ROOT / "docs" / "config-reference.md").read_text()
    assert committed == reference.markdown(), (
        "regenerate: drctl config schema -o markdown > docs/config-reference.md"
    )


def test_config_schema_prints_the_schema() -> None:
    code, out, _ = run_cli(["config", "schema"])
    assert code == 0 and json.loads(out)["$id"] == reference.SCHEMA_ID
    code, out, _ = run_cli(["config", "schema", "--format", "markdown"])
    assert code == 0 and out == reference.markdown()


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_config_names_the_schema_and_passes_it(path: Path) -> None:
    assert path.read_text().splitlines()[0] == reference.MODELINE
    errors = list(
        jsonschema.Draft202012Validator(reference.json_schema()).iter_errors(yaml.safe_load(path.read_text()))
    )
    assert errors == [], [e.message for e in errors]


def test_schema_refuses_what_the_loader_refuses() -> None:
    data = yaml.safe_load(EXAMPLES[0].read_text())
    data["health"] = {"interval_s": -1, "surprise": True}
    messages = [e.message for e in jsonschema.Draft202012Validator(reference.json_schema()).iter_errors(data)]
    assert any("-1" in m for m in messages) and any("surprise" in m for m in messages), messages
