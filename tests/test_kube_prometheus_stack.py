"""The kube-prometheus-stack component: generated from the promtool-tested rules and the dashboard,
and rendered by kustomize into each region overlay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.kustomize import KUBE, OVERLAYS, kubectl

ROOT = Path(__file__).resolve().parents[1]
COMPONENT = KUBE / "components" / "kube-prometheus-stack"
BUILD = COMPONENT / "build.py"


def _load(name: str) -> dict[str, Any]:
    return yaml.safe_load((COMPONENT / name).read_text())


def test_the_generated_objects_are_up_to_date() -> None:
    done = subprocess.run([sys.executable, str(BUILD), "--check"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_prometheus_rule_is_the_rules_file_and_the_configmap_the_dashboard() -> None:
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "drctl-rules.yaml").read_text())
    rule = _load("prometheusrule.yaml")
    assert rule["kind"] == "PrometheusRule" and rule["spec"]["groups"] == rules["groups"]
    cm = _load("grafana-dashboard.yaml")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads((ROOT / "deploy" / "grafana" / "drctl.json").read_text())
    assert json.loads(cm["data"]["drctl.json"]) == dashboard


def render_with_component(overlay: str, tmp: Path) -> list[dict[str, Any]]:
    """What a user's overlay with `components: [.../kube-prometheus-stack]` renders."""
    (tmp / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(KUBE / "overlays" / overlay, tmp)],
                "components": [os.path.relpath(COMPONENT, tmp)],
            }
        )
    )
    out = subprocess.run([kubectl(), "kustomize", str(tmp)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_renders_with_the_component(overlay: str, tmp_path: Path) -> None:
    objs = render_with_component(overlay, tmp_path)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for o in objs:
        by_kind.setdefault(o["kind"], []).append(o)
    (monitor,), (rule,), (service,) = by_kind["ServiceMonitor"], by_kind["PrometheusRule"], by_kind["Service"]
    # The ServiceMonitor finds the workers' Service and its metrics port, in the workers' namespace.
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {p["name"] for p in service["spec"]["ports"]}
    # The chart's default selectors match on the release label.
    assert monitor["metadata"]["labels"]["release"] == rule["metadata"]["labels"]["release"]
    dashboards = [
        c for c in by_kind["ConfigMap"] if c["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
    ]
    assert len(dashboards) == 1 and "drctl.json" in dashboards[0]["data"]
    # The overlay's own objects are all still there, unchanged in kind.
    assert {"Deployment", "ServiceAccount", "PodDisruptionBudget"} <= set(by_kind)
    assert rule["spec"]["groups"][0]["rules"]


def test_the_docs_snippet_names_the_component_from_each_overlay() -> None:
    from tests.support.docs_text import blocks

    (snippet,) = [yaml.safe_load(b) for b in blocks((ROOT / "docs/monitoring.md").read_text(), "yaml")]
    page = "docs/monitoring.md"  # tests/test_docs_snippets.py: this test reads the page's YAML
    for overlay in OVERLAYS:
        for path in snippet["components"]:
            assert (KUBE / "overlays" / overlay / path).resolve() == COMPONENT.resolve(), (page, overlay)
