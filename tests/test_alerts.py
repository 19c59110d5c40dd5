"""The alert rules and the Alertmanager example, checked by Prometheus's and Alertmanager's own tools."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

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
