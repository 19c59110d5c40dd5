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
    """Every Kubernetes write: a client write method called directly, or passed to a helper of the
    same module that calls it through a parameter (`create(...)`, as `_create_or_replace` does); the
    latter is listed with the keywords of the helper's call."""
    out = []
    for folder in ("drctl", "activities", "workflows"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "devstack" in path.parts:  # the stand-ins of Velero and the controllers, not drctl
                continue
            tree = ast.parse(path.read_text())
            called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
            # Calls through a parameter named for its role: create(...), replace(...), patch(...).
            # Each role keeps only the keywords every such call passes.
            through: dict[str, set[str]] = {}
            for n in ast.walk(tree):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _ROLES:
                    kws = {k.arg for k in n.keywords if k.arg}
                    through[n.func.id] = through[n.func.id] & kws if n.func.id in through else kws
            for node in ast.walk(tree):
                if not isinstance(node, ast.Attribute):
                    continue
                name = node.attr
                if not (_WRITE.match(name) and name not in _NOT_KUBE and "namespace" in name):
                    continue
                rel = str(path.relative_to(ROOT))
                if id(node) in called:
                    call = next(c for c in ast.walk(tree) if isinstance(c, ast.Call) and c.func is node)
                    out.append((rel, node.lineno, name, {k.arg for k in call.keywords if k.arg}))
                else:  # passed to a helper: judged by the helper's call in its role
                    out.append((rel, node.lineno, name, through.get(name.split("_", 1)[0], set())))
    return out


_ROLES = ("create", "replace", "patch")


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
