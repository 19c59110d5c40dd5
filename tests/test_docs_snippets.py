"""Every fleet-config YAML snippet README.md and docs/*.md show is valid config.

Each snippet is merged into the dev stack's config/fleet.yaml and the result validated by the real
schema, so a renamed or removed key, or a value the schema refuses, fails here (the schema forbids
unknown keys). A YAML block that is not fleet config names the test that checks it instead.
"""

from __future__ import annotations

import copy
import textwrap
from typing import Any

import pytest
import yaml

from drctl.config.schema import FleetConfig
from tests.support.docs_text import ROOT, blocks, name_of, pages

# YAML the pages show that is not a fleet config: (page, top-level key) → the test that checks it.
NOT_FLEET_CONFIG = {
    ("docs/production.md", "users"): "tests/test_readme_production.py",  # the kubeconfig exec plugin
    (
        "docs/monitoring.md",
        "components",
    ): "tests/test_kube_prometheus_stack.py",  # a kustomize overlay's lines
}


def _snippets() -> list[tuple[str, dict[str, Any]]]:
    loaded = [
        (name_of(p), yaml.safe_load(textwrap.dedent(b)))
        for p in pages()
        for b in blocks(p.read_text(), "yaml")
    ]
    return [(page, data) for page, data in loaded if data is not None]  # a block of comments shows no config


def _merge(into: dict[str, Any], snippet: dict[str, Any]) -> None:
    for key, value in snippet.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


SNIPPETS = _snippets()


@pytest.mark.parametrize(("page", "snippet"), SNIPPETS, ids=[f"{p}:{'+'.join(s)}" for p, s in SNIPPETS])
def test_config_snippet_is_valid_fleet_config(page: str, snippet: dict[str, Any]) -> None:
    keys = {(page, k) for k in snippet}
    if keys <= NOT_FLEET_CONFIG.keys():
        for key in keys:  # the named test reads this page's YAML itself
            assert f'"{page}"' in (ROOT / NOT_FLEET_CONFIG[key]).read_text(), NOT_FLEET_CONFIG[key]
        return
    assert not keys & NOT_FLEET_CONFIG.keys(), f"{page}: a snippet mixes fleet config with {keys}"
    config = copy.deepcopy(yaml.safe_load((ROOT / "config" / "fleet.yaml").read_text()))
    _merge(config, snippet)
    FleetConfig.model_validate(config)  # raises, naming the field, when the page is wrong


def test_the_pages_show_config_snippets_and_a_wrong_one_fails() -> None:
    assert len([s for p, s in SNIPPETS if p == "docs/configuration.md"]) >= 6
    config = copy.deepcopy(yaml.safe_load((ROOT / "config" / "fleet.yaml").read_text()))
    _merge(config, {"health": {"quorum": {"mode": "majority", "vantage_timeout": 3}}})
    with pytest.raises(ValueError, match="vantage_timeout"):
        FleetConfig.model_validate(config)
