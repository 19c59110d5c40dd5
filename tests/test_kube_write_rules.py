"""Every Kubernetes write in drctl names what a real API server needs, read from the code itself.

A patch without `_content_type` is sent as strategic merge (which no custom resource accepts) or as
a JSON Patch; a write without `field_validation="Strict"` has a misspelt field dropped with only a
warning. tests/devstack/test_kube_strict.py shows the server side of both.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_WRITE = re.compile(r"^(create|replace|patch)_(namespaced_)?\w+$")
# Client methods that look like writes but are not Kubernetes API calls.
_NOT_KUBE = {"create_task", "create_schedule", "create_bucket", "create_backup", "create_restore"}


def _writes() -> list[tuple[str, int, str, set[str]]]:
    out = []
    for folder in ("drctl", "activities", "workflows"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "devstack" in path.parts:  # the stand-ins of Velero and the controllers, not drctl
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                name = node.func.attr
                if _WRITE.match(name) and name not in _NOT_KUBE and "namespace" in name:
                    kws = {k.arg for k in node.keywords if k.arg}
                    out.append((str(path.relative_to(ROOT)), node.lineno, name, kws))
    return out


def test_every_kubernetes_write_is_strict_and_every_patch_names_its_type() -> None:
    writes = _writes()
    assert len(writes) >= 10  # the scan finds the provider's writes at all
    missing = [
        f"{p}:{n} {name}: field_validation" for p, n, name, kws in writes if "field_validation" not in kws
    ]
    missing += [
        f"{p}:{n} {name}: _content_type"
        for p, n, name, kws in writes
        if name.startswith("patch_") and "_content_type" not in kws
    ]
    assert not missing, missing
