"""The dev stack's controller delays are documented where a user reads them, with the defaults the
schema has: docs/devstack.md ("Controller delays" and the model load) and the stand-in's table in
docs/kubernetes-standin.md. A changed default, or a new delay, fails here until the docs follow."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from drctl.config.schema import DevStackConfig

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "docs" / "devstack.md", ROOT / "docs" / "kubernetes-standin.md"]
# The fields of DevStackConfig that delay what a controller or a replica does after a change.
DELAYS = ["deployment_sync_delay_s", "route_sync_delay_s", "velero_backup_sync_s", "model_load_s"]


def test_every_delay_field_is_listed_here() -> None:
    fields = {n for n in DevStackConfig.model_fields if re.search(r"(delay|sync|load)_s$", n)}
    assert fields == set(DELAYS)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
@pytest.mark.parametrize("field", DELAYS)
def test_each_delay_is_documented_with_its_default(doc: Path, field: str) -> None:
    default = DevStackConfig.model_fields[field].default
    text = " ".join(doc.read_text().split())
    found = re.findall(rf"`devstack\.{field}`,? \(?(?:default )?([0-9.]+) s", text)
    assert found, f"{doc.name} does not name devstack.{field} with its default"
    assert {float(x) for x in found} == {float(default)}, (doc.name, field, found, default)
