"""The Debian tool list lives in .ci/debian-tools only; `make deps` and .ci/run both install from it
through .ci/install-debian-tools."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci"


def _copy_installer(tmp_path: Path, tools: str) -> Path:
    """The installer beside a list of our own, so what it finds missing is up to the test."""
    folder = tmp_path / "ci"
    folder.mkdir()
    shutil.copy(CI / "install-debian-tools", folder)
    (folder / "debian-tools").write_text(tools)
    return folder / "install-debian-tools"


def test_makefile_and_ci_run_share_the_one_list() -> None:
    listed = [ln.split()[:2] for ln in (CI / "debian-tools").read_text().splitlines() if ln and ln[0] != "#"]
    assert {tool for tool, _ in listed} == {"haproxy", "prometheus", "promtool", "amtool", "rclone"}
    make, run = (ROOT / "Makefile").read_text(), (CI / "run").read_text()
    assert re.search(r"^deps:\n\t@SUDO=\"\$\(SUDO\)\" \.ci/install-debian-tools$", make, re.M)
    assert re.search(r"^\.ci/install-debian-tools make:make$", run, re.M)
    for text in (make, run):
        assert "haproxy:haproxy" not in text and "prometheus-alertmanager" not in text


def test_installer_names_only_the_missing_packages(tmp_path: Path) -> None:
    script = _copy_installer(
        tmp_path,
        "# comment\nsh dash  # present everywhere\ndrctl-no-such-tool drctl-no-such-pkg\n"
        "drctl-no-such-tool-2 drctl-no-such-pkg\n",
    )
    out = subprocess.run(
        [script, "--missing", "drctl-extra-tool:drctl-extra-pkg"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    # Each package once, however many of its tools are missing; the arguments' pairs too.
    assert out.stdout.split() == ["drctl-no-such-pkg", "drctl-extra-pkg"]


def test_installer_refuses_a_line_without_a_package(tmp_path: Path) -> None:
    script = _copy_installer(tmp_path, "haproxy\n")
    out = subprocess.run([script, "--missing"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "debian-tools: line 'haproxy' names no package" in out.stderr and "Traceback" not in out.stderr
