"""The layers contract names packages: a forbidden import planted in any module of a layer fails `make lint`.

Each case copies the product packages and pyproject.toml into a temporary directory, adds one import
to one module, and runs the real `lint-imports` on the copy. The unplanted copy passes, so a failure
is the planted edge and nothing else.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
PACKAGES = ("drctl", "workflows", "activities")

# (module the import is planted in, the import, the contract that must break). The modules are new
# ones as well as existing ones: a package-level contract covers a module nobody named.
PLANTED = [
    ("workflows/failback.py", "import drctl.worker.process", "Workflows stay deterministic"),
    ("workflows/brand_new.py", "import drctl.worker.fleet_metrics", "Workflows stay deterministic"),
    ("workflows/lock.py", "import drctl.client.operations", "Workflows stay deterministic"),
    ("drctl/providers/route53.py", "import activities.traffic", "Layers"),
    ("drctl/providers/brand_new.py", "import activities.chaos", "Layers"),
    ("drctl/models/health.py", "import drctl.client.connection", "Layers"),
    ("drctl/config/brand_new.py", "import drctl.models.health", "Layers"),
]


def _copy(tmp: Path) -> Path:
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, tmp / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp / "pyproject.toml")
    return tmp


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}  # the copy, not the installed tree, is what is read
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def clean_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = _copy(tmp_path_factory.mktemp("layers"))
    done = _lint(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    return tree


@pytest.mark.parametrize(("module", "line", "contract"), PLANTED, ids=[f"{m}:{i}" for m, i, _ in PLANTED])
def test_a_planted_forbidden_import_breaks_a_contract(
    clean_tree: Path, tmp_path: Path, module: str, line: str, contract: str
) -> None:
    tree = _copy(tmp_path)
    target = tree / module
    target.write_text(
        (target.read_text() if target.exists() else '"""A module nobody named."""\n') + f"\n{line}\n"
    )
    done = _lint(tree)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    # lint-imports wraps long contract names: read "<name> KEPT|BROKEN" from the whitespace-joined summary.
    summary = re.search(r"dependencies\.\s*-+\s*(.*?)\s*Contracts: \d+ kept", out, re.S)
    assert summary, out
    verdicts = re.findall(r"(.+?) (KEPT|BROKEN)\s*", " ".join(summary.group(1).split()))
    assert any(name.strip().startswith(contract) and v == "BROKEN" for name, v in verdicts), (verdicts, out)
