"""Usage mistakes get click's usage message and exit 2, never a traceback; the one error table; --version and
shell completion."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import TerminatedError

from drctl.chaos.validate import ExperimentInvalid
from drctl.cli.common import UserError
from drctl.cli.errors import render_error
from drctl.client.connection import TemporalUnreachable
from drctl.client.operations import FleetBusyError
from drctl.models.phases import OperationInfo
from tests.support.cli import DRCTL, run_cli
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["nosuch"], "No such command 'nosuch'"),
        (["failover"], "Missing option '--to'"),
        (["drill", "run", "experiments/region-outage.json", "--force"], "No such option: --force"),
        (["upgrade", "--image"], "requires an argument"),
        (["status", "--output", "xml"], "'xml' is not one of"),
    ],
)
def test_usage_errors_exit_2_without_traceback(args: list[str], words: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "drctl", *args], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert words in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_help_states_the_exit_codes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "drctl", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "300"},
    )
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "0 succeeded; 1 ran and did not succeed" in text and "3 nothing started: the fleet is busy" in text
    assert "4 still running: --timeout passed" in text


def test_version_prints_the_installed_package_version() -> None:
    from importlib.metadata import version

    code, out, err = run_cli(["--version"])
    assert code == 0 and out.strip() == f"drctl {version('drctl')}", (out, err)


def test_shell_completion_completes_commands_and_prints_its_script(monkeypatch: pytest.MonkeyPatch) -> None:
    # What the installed script does on <TAB>: the shell sets these and runs drctl.
    monkeypatch.setenv("_DRCTL_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", "drctl ops w")
    monkeypatch.setenv("COMP_CWORD", "2")
    code, out, _ = run_cli([])
    assert code == 0 and out.split() == ["watch"]
    monkeypatch.setenv("COMP_WORDS", "drctl fail")
    monkeypatch.setenv("COMP_CWORD", "1")
    code, out, _ = run_cli([])
    assert code == 0 and sorted(out.split()) == ["failback", "failover", "failover-import"]
    monkeypatch.delenv("_DRCTL_COMPLETE")
    done = _from_bash("--show-completion", home=None)
    assert done.returncode == 0 and "_drctl_completion" in done.stdout, done
    assert "_DRCTL_COMPLETE=complete_bash" in done.stdout, done


def _from_bash(flag: str, home: Path | None) -> subprocess.CompletedProcess[str]:
    """`drctl FLAG` typed in a bash session: the completion flags act for the shell they run from.

    (`; exit $?` keeps bash from exec-ing drctl in its own place, so bash stays drctl's parent.)
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("_DRCTL")}
    if home is not None:
        env["HOME"] = str(home)
    return subprocess.run(
        ["bash", "--norc", "-c", f"'{DRCTL}' {flag}; exit $?"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_install_completion_writes_the_script_and_sources_it(tmp_path: Path) -> None:
    done = _from_bash("--install-completion", home=tmp_path)
    assert done.returncode == 0, done
    script = tmp_path / ".bash_completions" / "drctl.sh"
    assert "_DRCTL_COMPLETE=complete_bash" in script.read_text()
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text()


@pytest.mark.parametrize(
    ("exc", "code", "words"),
    [
        (
            FleetBusyError(
                "dev", OperationInfo(workflow_id="failover/dev", operation="failover", fleet="dev")
            ),
            3,
            "fleet 'dev' is busy: failover failover/dev is running",
        ),
        (
            TemporalUnreachable("127.0.0.1:1", ConnectionRefusedError("refused")),
            3,
            "cannot reach Temporal at 127.0.0.1:1",
        ),
        (UserError("bad --steps"), 2, "bad --steps"),
        (UserError("no report", exit_code=1), 1, "no report"),
        (ExperimentInvalid("x.json", "no method"), 2, "invalid experiment x.json: no method"),
        (
            WorkflowFailureError(cause=TerminatedError("terminated by ops", ())),
            1,
            "the operation ended without a result: terminated by ops",
        ),
    ],
)
def test_one_table_maps_each_error_to_its_exit_code(
    exc: Exception, code: int, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert render_error(exc) == code
    err = capsys.readouterr().err
    assert err.startswith("error: ") and words in " ".join(err.split())


def test_a_declined_confirmation_exits_1_and_ctrl_c_130(capsys: pytest.CaptureFixture[str]) -> None:
    assert render_error(typer.Abort()) == 1 and capsys.readouterr().err.strip() == "aborted"
    assert render_error(KeyboardInterrupt()) == 130 and capsys.readouterr().err.strip() == "interrupted"


def test_an_unknown_error_is_not_disguised_as_a_user_error() -> None:
    with pytest.raises(ZeroDivisionError):
        render_error(ZeroDivisionError("a bug"))


def test_completion_offers_the_fleet_regions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_DRCTL_COMPLETE", "complete_bash")
    monkeypatch.setenv("COMP_WORDS", f"drctl failover -c {ROOT / 'config' / 'fleet.yaml'} --to us-")
    monkeypatch.setenv("COMP_CWORD", "5")
    code, out, _ = run_cli([])
    assert code == 0 and sorted(out.split()) == ["us-east-1", "us-west-1"]


def test_operation_completion_without_temporal_is_empty_and_bounded(tmp_path: Path) -> None:
    from drctl.cli import complete

    cfg = (ROOT / "config" / "fleet.yaml").read_text().replace("127.0.0.1:7233", f"127.0.0.1:{free_port()}")
    (tmp_path / "f.yaml").write_text(cfg)
    ctx = type("Ctx", (), {"params": {"config": tmp_path / "f.yaml"}})()
    started = time.monotonic()
    assert complete.operation_ids(ctx, "") == []
    assert time.monotonic() - started < complete.TEMPORAL_BUDGET_S + 5  # a bound, not a timing claim
