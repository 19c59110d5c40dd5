"""Produce real Chaos Toolkit journals: tiny experiments run by the real `chaos run` subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def ratio_probe(url: str, name: str = "global-endpoint-serves") -> dict[str, Any]:
    return {
        "type": "probe",
        "name": name,
        "provider": {
            "type": "python",
            "module": "drctl.chaos.probes",
            "func": "global_success_ratio",
            "arguments": {"requests": 3, "timeout_s": 2},
        },
        "tolerance": {"type": "range", "range": [0.9, 1.0]},
    }


def fault_action(url: str, body: dict[str, Any], name: str = "inject-fault") -> dict[str, Any]:
    """A real fault: fleetsim's admin API, through Chaos Toolkit's own http provider."""
    return {
        "type": "action",
        "name": name,
        "provider": {
            "type": "http",
            "url": f"{url}/admin/fault",
            "method": "POST",
            "headers": {"Content-Type": "application/json"},
            "arguments": body,
            "timeout": 3,
        },
    }


def clear_action(url: str, name: str = "clear-fault") -> dict[str, Any]:
    return {
        "type": "action",
        "name": name,
        "provider": {"type": "http", "url": f"{url}/admin/fault", "method": "DELETE", "timeout": 3},
    }


def experiment(
    url: str,
    method: list[dict[str, Any]],
    rollbacks: list[dict[str, Any]],
    configuration: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "title": "tiny drill",
        "description": "a tiny experiment against one fleetsim",
        # The probes take the served model from the fleet config or from `model`: a real vLLM answers
        # 404 to any other name, so there is no default.
        "configuration": {"global_endpoint": url, "model": "fleetsim-tiny", **(configuration or {})},
        "steady-state-hypothesis": {"title": "serves", "probes": [ratio_probe(url)]},
        "method": method,
        "rollbacks": rollbacks,
    }


def chaos_run(exp: dict[str, Any], workdir: Path) -> tuple[int, dict[str, Any]]:
    """Run `chaos run` exactly as the drill activity does; return its exit code and journal."""
    workdir.mkdir(parents=True, exist_ok=True)
    path, journal = workdir / "experiment.json", workdir / "journal.json"
    path.write_text(json.dumps(exp))
    log = str(workdir / "chaos.log")
    chaos = [sys.executable, "-m", "chaostoolkit", "--no-version-check", "--log-file", log]
    run = ["run", "--journal-path", str(journal), "--rollback-strategy", "always", str(path)]
    proc = subprocess.run([*chaos, *run], cwd=workdir, capture_output=True, timeout=60)
    return proc.returncode, json.loads(journal.read_text())
