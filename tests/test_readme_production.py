"""docs/production.md ("Run it in production"): every command it shows runs, and what it names exists."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from tests.support.docs_text import ROOT, blocks, page
from tests.support.kustomize import one, render

BIN = Path(sys.executable).parent


def _section() -> str:
    return page("docs/production.md")


def _blocks(lang: str) -> list[str]:
    return blocks(_section(), lang)


def test_every_shell_command_runs() -> None:
    commands = [line.split("  #")[0].strip() for block in _blocks("sh") for line in block.splitlines()]
    commands = [c for c in commands if c]
    assert len(commands) >= 3
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    for cmd in commands:
        out = subprocess.run(cmd, shell=True, cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
        assert out.returncode == 0, f"{cmd}: {out.stderr}"


def test_the_kubeconfig_exec_plugin_shown_prints_a_credential() -> None:
    (snippet,) = [textwrap.dedent(b) for b in _blocks("yaml")]
    exec_ = yaml.safe_load(snippet)["users"][0]["user"]["exec"]
    assert exec_["command"] == "drctl"
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
    }
    out = subprocess.run(
        [sys.executable, "-m", "drctl", *exec_["args"]], capture_output=True, text=True, env=env, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["apiVersion"] == exec_["apiVersion"]


def test_secret_table_matches_the_manifests() -> None:
    named = set(re.findall(r"^\s*\| `(drctl-[a-z-]+)` \|", _section(), re.M))
    pod = one(render("us-west-1"), "Deployment")["spec"]["template"]["spec"]
    referenced = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    referenced |= {
        e["valueFrom"]["secretKeyRef"]["name"] for e in pod["containers"][0]["env"] if "valueFrom" in e
    }
    referenced |= {
        e["secretRef"]["name"] for e in pod["containers"][0].get("envFrom", []) if "secretRef" in e
    }
    assert named == referenced
    mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    for path in re.findall(r"`(/(?:etc|var)/[\w/.-]+)`", _section()):
        assert any(path == m or path.startswith(m + "/") for m in mounts), path
