"""The alert rules and the Alertmanager example, checked by Prometheus's and Alertmanager's own tools."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "deploy" / "prometheus" / "drctl-rules.yaml"
RULE_TESTS = sorted((ROOT / "deploy" / "prometheus" / "tests").glob("*.yaml"))
ALERTMANAGER = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"


def _tool(name: str) -> str:
    # Missing tools fail the run: `make deps` installs them (Debian prometheus, prometheus-alertmanager).
    found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if not found:
        pytest.fail(f"{name} is not installed (make deps)")
    return found


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_promtool_check_rules() -> None:
    done = _run(_tool("promtool"), "check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr


def test_promtool_rule_unit_tests_pass() -> None:
    assert RULE_TESTS
    done = _run(_tool("promtool"), "test", "rules", *map(str, RULE_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("SUCCESS") == len(RULE_TESTS), done.stdout


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    alerts = {
        r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r
    }
    fires: set[str] = set()
    quiet: set[str] = set()
    for f in RULE_TESTS:
        for t in yaml.safe_load(f.read_text())["tests"]:
            for case in t.get("alert_rule_test", []):
                (fires if case.get("exp_alerts") else quiet).add(case["alertname"])
    assert alerts == fires, f"alerts without a firing test: {alerts - fires}"
    assert alerts == quiet, f"alerts without a quiet test: {alerts - quiet}"


def test_amtool_accepts_the_example_config_and_routes_by_severity() -> None:
    amtool = _tool("amtool")
    done = _run(amtool, "check-config", str(ALERTMANAGER))
    assert done.returncode == 0, done.stdout + done.stderr

    def route(*labels: str) -> str:
        out = _run(amtool, "config", "routes", "test", f"--config.file={ALERTMANAGER}", *labels)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout.strip()

    assert route("alertname=DrctlFailoverFailed", "severity=critical", "fleet=prod") == "drctl-pager"
    assert route("alertname=DrctlNoPassingDrill", "severity=warning", "fleet=prod") == "drctl-slack"


PROMETHEUS_ALERTING = ROOT / "deploy" / "prometheus" / "prometheus-alerting.yaml"
LOCAL_ALERTS = {"DrctlWorkerMetricsAbsent", "DrctlWorkerTemporalDisconnected"}


def _alerts() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]


def test_every_alert_says_whether_it_is_fleet_wide_or_about_the_local_workers() -> None:
    """Fleet-scoped alerts aggregate away the worker (every region's Prometheus computes the same
    one); local ones keep the worker's labels. The scope decides the cross-region deduplication."""
    for rule in _alerts():
        scope = rule["labels"].get("scope")
        assert scope == ("local" if rule["alert"] in LOCAL_ALERTS else "fleet"), rule["alert"]
        expr = " ".join(rule["expr"].split())
        if scope == "fleet":
            assert " by (" in expr and "instance" not in expr and "pod" not in expr, rule["alert"]


def test_each_regions_prometheus_drops_its_label_from_fleet_alerts() -> None:
    """So every region sends the identical fleet alert and Alertmanager pages once, not per region."""
    done = _run(_tool("promtool"), "check", "config", str(PROMETHEUS_ALERTING))
    assert done.returncode == 0, done.stdout + done.stderr
    cfg = yaml.safe_load(PROMETHEUS_ALERTING.read_text())
    (region_label,) = cfg["global"]["external_labels"]
    (relabel,) = cfg["alerting"]["alert_relabel_configs"]
    assert relabel == {
        "source_labels": ["scope"],
        "regex": "fleet",
        "target_label": region_label,
        "replacement": "",
    }
    # Alertmanager groups by fleet as well, so even an unrelabelled copy joins the same notification.
    route = yaml.safe_load(ALERTMANAGER.read_text())["route"]
    assert "fleet" in route["group_by"] and region_label not in route["group_by"]
