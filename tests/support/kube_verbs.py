"""The Kubernetes permissions drctl's code needs, read from the code itself.

Every call of the official client is an attribute named `<verb>_namespaced_<kind>[_<subresource>]`.
Its REST path, hence API group and resource, is in the client's generated source for that method;
custom objects (`*_namespaced_custom_object`) name group and plural as arguments, resolved here from
string literals, module constants, or (one function deep at a time) the literals callers pass.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import kubernetes.client

Permission = tuple[str, str, str]  # (API group, resource[/subresource], verb)

_METHOD = re.compile(r"^(read|get|list|create|replace|patch|delete)_namespaced_\w+$")
_VERB = {
    "read": "get",
    "get": "get",
    "list": "list",
    "create": "create",
    "replace": "update",
    "patch": "patch",
    "delete": "delete",
}
# Cluster-scoped calls would need a ClusterRole, which the manifests deliberately lack: refuse to guess.
_CLUSTER = re.compile(
    r"^(read|get|list|create|replace|patch|delete|watch)_(cluster_custom_object\w*|namespace|node|"
    r"\w+_for_all_namespaces)$"
)
_PATH = re.compile(r"'(/apis?/[^']+)'")
_ROOT = Path(__file__).resolve().parents[2]


@cache
def rest_path(method: str) -> str:
    """The resource path the generated client uses for this method (any API class that has it)."""
    for name in dir(kubernetes.client):  # the package loads its API classes lazily: not vars()
        cls = getattr(kubernetes.client, name)
        if not (name.endswith("Api") and inspect.isclass(cls) and hasattr(cls, method)):
            continue
        # Where the generator put the path: `_<method>_serialize` (client 35+) or `<method>_with_http_info`.
        for helper in (f"_{method}_serialize", f"{method}_with_http_info"):
            found = _PATH.search(inspect.getsource(getattr(cls, helper))) if hasattr(cls, helper) else None
            if found:
                return found.group(1)
    raise LookupError(f"no kubernetes client API has {method}")


def group_resource(path: str) -> tuple[str, str]:
    """'/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale' -> ('apps', 'deployments/scale')."""
    parts = path.strip("/").split("/")
    group = "" if parts[0] == "api" else parts[1]
    rest = parts[parts.index("namespaces") + 2 :]
    resource = rest[0]
    if len(rest) >= 3:  # {name}/{subresource}
        resource += "/" + rest[2]
    return group, resource


@cache
def _module(path: Path) -> _Module:
    """One parse per file: modules import each other's constants, transitively."""
    return _Module(path)


class _Module:
    def __init__(self, path: Path) -> None:
        self.tree = ast.parse(path.read_text(), str(path))
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
        self.constants: dict[str, str] = {}
        for stmt in self.tree.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant | ast.Tuple):
                for target in stmt.targets:
                    names = target.elts if isinstance(target, ast.Tuple) else [target]
                    values = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
                    for n, v in zip(names, values, strict=False):
                        if (
                            isinstance(n, ast.Name)
                            and isinstance(v, ast.Constant)
                            and isinstance(v.value, str)
                        ):
                            self.constants[n.id] = v.value
            # `from drctl.providers.velero import GROUP`: the constant as the defining module has it.
            if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.module.startswith("drctl."):
                source = _ROOT.joinpath(*stmt.module.split(".")).with_suffix(".py")
                if source.exists():
                    theirs = _module(source).constants
                    for alias in stmt.names:
                        if alias.name in theirs:
                            self.constants[alias.asname or alias.name] = theirs[alias.name]

    def _function(self, node: ast.AST) -> ast.FunctionDef | None:
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, ast.FunctionDef):
                return node
        return None

    def strings(self, expr: ast.expr, depth: int = 0) -> set[str]:
        """Every string this expression can be: a literal, a constant, or what callers pass for a parameter."""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return {expr.value}
        if not isinstance(expr, ast.Name) or depth > 4:
            raise ValueError(f"cannot resolve {ast.unparse(expr)} (line {expr.lineno})")
        if expr.id in self.constants:
            return {self.constants[expr.id]}
        fn = self._function(expr)
        params = [a.arg for a in fn.args.args] if fn else []
        if fn is None or expr.id not in params:
            raise ValueError(f"cannot resolve {expr.id} (line {expr.lineno})")
        index = params.index(expr.id) - (1 if params[0] == "self" else 0)
        out: set[str] = set()
        for call in ast.walk(self.tree):
            if (
                isinstance(call, ast.Call)
                and getattr(call.func, "attr", getattr(call.func, "id", None)) == fn.name
            ):
                out |= self.strings(call.args[index], depth + 1)
        return out

    def custom_object_args(self, node: ast.Attribute) -> tuple[ast.expr, ast.expr] | None:
        """(group, plural) expressions of a custom-object call, called directly or handed to a wrapper."""
        call = self.parent.get(node)
        if isinstance(call, ast.Call) and call.func is node:
            return (call.args[0], call.args[3]) if len(call.args) >= 4 else None
        if isinstance(call, ast.Call) and node in call.args:  # e.g. self._call(action, api.get_..., plural)
            return ast.Name(id="GROUP", lineno=node.lineno), call.args[call.args.index(node) + 1]
        return None


def permissions_in(path: Path) -> Iterator[tuple[Permission, str]]:
    """(permission, where) for every Kubernetes client call in one source file."""
    mod = _module(path)
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.Attribute) and _CLUSTER.match(node.attr):
            raise ValueError(f"{path}:{node.lineno} {node.attr} is cluster-scoped: the worker has Roles only")
        if not (isinstance(node, ast.Attribute) and _METHOD.match(node.attr)):
            continue
        verb = _VERB[node.attr.split("_", 1)[0]]
        where = f"{path}:{node.lineno} {node.attr}"
        if node.attr.endswith("_custom_object"):
            args = mod.custom_object_args(node)
            if args is None:
                raise ValueError(f"{where}: cannot find the group and plural of this custom object call")
            for group in mod.strings(args[0]):
                for plural in mod.strings(args[1]):
                    yield (group, plural, verb), where
        else:
            group, resource = group_resource(rest_path(node.attr))
            yield (group, resource, verb), where


def code_permissions(files: list[Path]) -> dict[Permission, list[str]]:
    found: dict[Permission, list[str]] = {}
    for path in files:
        for perm, where in permissions_in(path):
            found.setdefault(perm, []).append(where)
    return found
