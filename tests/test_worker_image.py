"""The worker image is complete and reproducible: it installs every executable the product starts,
every Python package from a hash-pinned lock, on a base image pinned to a full version tag.

Docker cannot run here, so the Dockerfile is checked statically and the lock is installed for real
into a fresh venv (what the image's `pip install --require-hashes` does).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from drctl.providers import executables

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "Dockerfile").read_text()
WORKER_IMAGE_DOC = (ROOT / "docs" / "worker-image.md").read_text()
LOCK = ROOT / "requirements" / "worker.lock"
PRODUCT = ("drctl", "activities", "workflows")
# Calls that start a program: (module, function) as the code spells them.
_STARTERS = {
    ("subprocess", n) for n in ("run", "Popen", "call", "check_call", "check_output", "getoutput")
} | {("asyncio", "create_subprocess_exec"), ("asyncio", "create_subprocess_shell")}
_STARTERS |= {("os", n) for n in ("system", "popen", "execv", "execvp", "execve", "spawnv", "spawnvp")}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def _argv(call: ast.Call, scope: ast.AST) -> list[ast.expr]:
    """The argv list a start call gets: a literal, `*cmd`, or a name assigned a list in the same scope."""
    args = list(call.args)
    first = args[0] if args else None
    if isinstance(first, ast.Starred):
        first = first.value
    if isinstance(first, ast.Name):
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
                if any(isinstance(t, ast.Name) and t.id == first.id for t in node.targets):
                    return list(node.value.elts)
        return []
    if isinstance(first, ast.List):
        return list(first.elts)
    return args


def _program(argv: list[ast.expr]) -> str | None:
    """The registry entry a start call names, or None when its program is not from the registry."""
    if not argv:
        return None
    head = argv[0]
    if isinstance(head, ast.Call) and _dotted(head.func) == "executables.path" and head.args:
        entry = _dotted(head.args[0])  # executables.RCLONE
        return entry.split(".")[-1] if entry.startswith("executables.") else None
    if _dotted(head) == "sys.executable" and len(argv) >= 3:
        flag, module = argv[1], argv[2]
        if isinstance(flag, ast.Constant) and flag.value == "-m":
            entry = _dotted(module)  # executables.CHAOS.module
            return entry.split(".")[1] if entry.startswith("executables.") else None
    return None


def started_programs() -> tuple[set[str], list[str]]:
    """Every registry entry the product code starts, and the start calls that bypass the registry."""
    found: set[str] = set()
    stray: list[str] = []
    for root in PRODUCT:
        for path in sorted((ROOT / root).rglob("*.py")):
            if "devstack" in path.parts:  # the dev stack is not in the image (the devstack extra)
                continue
            tree = ast.parse(path.read_text())
            scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
            for scope in scopes or [tree]:
                for node in ast.walk(scope):
                    if not isinstance(node, ast.Call):
                        continue
                    name = _dotted(node.func).rsplit(".", 2)[-2:]
                    if tuple(name) not in _STARTERS:
                        continue
                    entry = _program(_argv(node, scope))
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    if entry is None:
                        stray.append(where)
                    else:
                        found.add(entry)
    return found, stray


def test_every_started_program_comes_from_the_registry() -> None:
    found, stray = started_programs()
    assert not stray, (
        "these calls start a program not named in drctl/providers/executables.py, so nothing checks "
        f"that the image has it: {stray}"
    )
    registered = {
        k for k, v in vars(executables).items() if v in executables.BINARIES + executables.PYTHON_MODULES
    }
    # Both ways: a registry entry nothing starts is stale, and the scan must see what it claims to.
    assert found == registered == {"RCLONE", "CHAOS"}


def _apt_installed() -> dict[str, str]:
    """Debian packages the final stage installs, with the version each is pinned to ('' if none)."""
    final = DOCKERFILE.rsplit("\nFROM ", 1)[1]
    out: dict[str, str] = {}
    for m in re.finditer(r"apt-get install ([^&\n]*(?:\\\n[^&\n]*)*)", final):
        for word in m.group(1).replace("\\\n", " ").split():
            if not word.startswith("-"):
                name, _, version = word.partition("=")
                out[name] = version
    return out


def test_the_image_installs_every_registered_binary_pinned() -> None:
    installed = _apt_installed()
    for binary in executables.BINARIES:
        assert binary.debian_package in installed, f"the Dockerfile does not install {binary.debian_package}"
        assert installed[binary.debian_package], f"{binary.debian_package} is not pinned to a version"


def _locked() -> dict[str, str]:
    text = LOCK.read_text()
    return {_norm(m.group(1)): m.group(2) for m in re.finditer(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", text, re.M)}


def test_the_lock_pins_every_runtime_dependency_with_hashes() -> None:
    locked = _locked()
    text = LOCK.read_text()
    # Every requirement line carries hashes (pip --require-hashes refuses the file otherwise).
    for block in re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 6)[-1]):
        if "==" in block:
            assert "--hash=sha256:" in block, f"unhashed: {block.splitlines()[0]}"
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    missing = {_norm(re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0]) for d in deps} - set(locked)
    assert not missing, f"runtime dependencies missing from {LOCK.name}; regenerate it (docs/worker-image.md)"
    for module in executables.PYTHON_MODULES:
        assert _norm(module.distribution) in locked


def test_the_lock_satisfies_pyproject() -> None:
    """Fresh enough: every pinned version of a runtime dependency meets pyproject's specifier."""
    from packaging.requirements import Requirement

    locked = _locked()
    for dep in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        req = Requirement(dep)
        assert req.specifier.contains(locked[_norm(req.name)]), (
            f"{req} but the lock has {locked[_norm(req.name)]}"
        )


def test_the_image_installs_from_the_lock_on_a_pinned_base() -> None:
    bases = re.findall(r"^FROM (\S+)", DOCKERFILE, re.M)
    assert bases and len(set(bases)) == 1, f"build and runtime stages on different bases: {bases}"
    for base in bases:
        # A tag names the release; the digest fixes the bytes (a tag is re-pushed with Debian updates).
        assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}", base), (
            f"base image not pinned by digest: {base}"
        )
        assert base.split("@")[1] in WORKER_IMAGE_DOC, "docs/worker-image.md does not name the digest"
    assert "COPY requirements/worker.lock " in DOCKERFILE
    assert re.search(r"pip install [^\n]*--require-hashes --no-deps -r /tmp/worker.lock", DOCKERFILE)
    # drctl's own wheel adds no package the lock did not pin.
    assert re.search(r"pip install --no-cache-dir --no-deps /wheels/\*\.whl", DOCKERFILE)
    assert "pip wheel --no-cache-dir --no-deps --no-build-isolation" in DOCKERFILE


def test_every_build_time_package_is_pinned_with_hashes() -> None:
    """The wheel is built with the locked setuptools, not whatever an isolated build would fetch."""
    from packaging.requirements import Requirement

    assert "COPY requirements/build.lock /tmp/build.lock" in DOCKERFILE
    assert re.search(r"pip install [^\n]*--require-hashes --no-deps -r /tmp/build.lock", DOCKERFILE)
    lock = (ROOT / "requirements" / "build.lock").read_text()
    pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", lock, re.M))
    backend = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    for req in map(Requirement, backend):
        assert _norm(req.name) in {_norm(n) for n in pins}, f"build requirement {req} not locked"
        assert req.specifier.contains(pins[req.name]), f"{req} but build.lock has {pins[req.name]}"
    for block in lock.split("==")[1:]:
        assert "--hash=sha256:" in block, "unhashed build package"
    # Every pip install in the image reads a lock with hashes, or installs the wheel built here.
    for line in re.findall(r"pip install [^\n]*", DOCKERFILE):
        assert "--require-hashes" in line or "/wheels/" in line, line


@pytest.mark.lockinstall
def test_the_lock_installs_in_a_fresh_venv_and_runs_the_worker_code(tmp_path: Path) -> None:
    """What the image build does: every package from the lock, checked against its hash, nothing else.
    Then the product's worker code imports in that venv: the lock holds all it needs."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = str(venv / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python]
    done = subprocess.run(
        # --no-compile: the hashes and the set are what is checked here; byte-compiling botocore would
        # triple the time on a loaded machine.
        [*pip, "install", "--quiet", "--no-compile", "--require-hashes", "--no-deps", "-r", str(LOCK)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    code = "import drctl.worker.process, drctl.cli.main, chaostoolkit.cli; print('imported')"
    ran = subprocess.run(
        [python, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert ran.returncode == 0 and "imported" in ran.stdout, ran.stderr[-3000:]


def test_the_documented_regeneration_command_is_the_one_that_made_the_lock() -> None:
    header = re.search(r"^#    (pip-compile .+)$", LOCK.read_text(), re.M)
    assert header, "the lock has no pip-compile header"
    doc = (ROOT / "docs" / "worker-image.md").read_text()
    assert f".venv/bin/{header.group(1)}" in doc


def test_the_build_lock_regeneration_command_is_documented() -> None:
    header = re.search(r"^#    (pip-compile .+)$", (ROOT / "requirements" / "build.lock").read_text(), re.M)
    assert header, "build.lock has no pip-compile header"
    assert f".venv/bin/{header.group(1)}" in WORKER_IMAGE_DOC


def test_the_published_image_is_the_one_every_overlay_names() -> None:
    """docs/worker-image.md's `docker buildx build --tag` is what the overlays run, at drctl's version."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    (pushed,) = re.findall(r"docker buildx build [^\n]*--tag (\S+) --push", WORKER_IMAGE_DOC)
    assert pushed == f"ghcr.io/drctl/drctl:{version}", pushed
    overlays = sorted((ROOT / "deploy" / "kubernetes" / "overlays").glob("*/kustomization.yaml"))
    assert overlays
    for path in overlays:
        import yaml

        (image,) = [i for i in yaml.safe_load(path.read_text())["images"] if i["name"] == "drctl"]
        assert f"{image['newName']}:{image['newTag']}" == pushed, path
    assert f"docker buildx imagetools inspect {pushed}" in WORKER_IMAGE_DOC
