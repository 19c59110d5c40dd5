"""One behaviour for every command, as a script and a reviewer meet it: -h, error objects on stdout
with -o json|yaml, one duration syntax, whole values when piped, and nothing from a file printed raw.

In-process (tests.support.cli.run_cli: stdout is not a terminal, as in CI) against a config whose
every endpoint, Temporal's included, is a closed loopback port: nothing here reaches a server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cli import commands, run_cli
from tests.support.config import fleet_config_data, write_fleet_config

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT = ROOT / "experiments" / "region-outage.json"
OSC52 = "\x1b]52;c;ZXZpbA==\x07"


@pytest.fixture(scope="module")
def config() -> str:
    return str(write_fleet_config())


def test_dash_h_is_help_on_every_command() -> None:
    failed = []
    for path in commands():
        code, out, err = run_cli([*path, "-h"])
        if code != 0 or "Usage:" not in out:
            failed.append(f"{' '.join(path)}: exit {code} {err.strip()[:120]}")
    assert not failed, failed


def _error(out: str, output: str) -> dict[str, Any]:
    doc = json.loads(out) if output == "json" else yaml.safe_load(out)
    assert isinstance(doc, dict) and set(doc) == {"error"}, out
    return doc["error"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_a_failure_with_o_json_or_yaml_is_an_error_object_on_stdout(
    output: str, config: str, tmp_path: Path
) -> None:
    bad = tmp_path / "fleet.yaml"
    bad.write_text("name: x\nregions: 3\n")
    code, out, err = run_cli(["config", "validate", str(bad), "-o", output])
    got = _error(out, output)
    assert code == 2 and got["exit_code"] == 2 and got["type"] == "ConfigError", (out, err)
    assert {"path": "regions", "message": "Input should be a valid list"} in got["problems"]
    assert err.startswith("error: invalid config")  # the person at the terminal still reads stderr
    # Temporal unreachable: exit 3, as the object says.
    code, out, err = run_cli(["status", "-c", config, f"--output={output}"])
    got = _error(out, output)
    assert code == 3 and got["exit_code"] == 3 and "cannot reach Temporal" in got["message"], (out, err)
    # A bad command line too.
    code, out, err = run_cli(["failover", "--to", "us-east-1", "--bogus", f"-o{output}"])
    assert code == 2 and "No such option" in _error(out, output)["message"], (out, err)


def test_without_o_a_failure_prints_nothing_on_stdout(config: str) -> None:
    code, out, err = run_cli(["status", "-c", config])
    assert code == 3 and out == "" and err.startswith("error: cannot reach Temporal"), (out, err)


@pytest.mark.parametrize(
    ("argv", "key", "expected"),
    [
        (["backup", "schedule", "create", "--every", "1h30m", "--ttl", "90"], "schedule", "@every 1h30m"),
        (["backup", "schedule", "create", "--every", "5m", "--ttl", "72h"], "ttl", "72h"),
        (
            ["drill", "schedule", "--cron", "0 3 * * MON", "-e", str(EXPERIMENT), "--jitter", "90"],
            "jitter",
            "1m30s",
        ),
    ],
)
def test_one_duration_syntax_for_every_duration_option(
    argv: list[str], key: str, expected: str, config: str
) -> None:
    code, out, err = run_cli([*argv, "-c", config, "--dry-run", "-o", "json"])
    assert code == 0, err
    plan = json.loads(out)["plan"]
    found = plan[0][key] if isinstance(plan, list) else plan[key]
    assert found == expected, plan


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--timeout", "5x"],
        ["status", "--interval", "-1s"],
        ["failover", "--to", "us-east-1", "--yes", "--timeout", "soon"],
        ["backup", "schedule", "create", "--every", "1h", "--ttl", "3 days"],
        ["drill", "schedule", "--cron", "0 3 * * MON", "-e", str(EXPERIMENT), "--jitter", "30 min"],
    ],
)
def test_a_bad_duration_is_one_line_naming_the_option_exit_2(argv: list[str], config: str) -> None:
    code, out, err = run_cli([*argv, "-c", config])
    option = next(a for a in argv if a in ("--timeout", "--interval", "--ttl", "--jitter"))
    assert code == 2 and err.startswith(f"error: {option} '"), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in out + err


def _config_with(tmp_path: Path, change: Any) -> str:
    data = fleet_config_data()
    change(data)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return str(path)


def test_config_values_with_markup_print_as_written_and_whole_when_piped(tmp_path: Path) -> None:
    long_tail = "/" + "v1-very-long-path-segment-" * 8 + "[/]end[red]"

    def change(d: dict[str, Any]) -> None:
        d["regions"][0]["gateway_url"] += long_tail

    code, out, err = run_cli(["config", "validate", _config_with(tmp_path, change)])
    assert code == 0, err
    # Neither a MarkupError nor an 80-column cut: the URL is on one line, whole.
    assert long_tail in out and "…" not in out, out


def test_hostile_text_from_a_file_never_reaches_the_terminal_raw(config: str, tmp_path: Path) -> None:
    exp = json.loads(EXPERIMENT.read_text())
    exp["title"] = f"T {OSC52} \x9b2J \u202eevil [/] [red]x\nerror: none; the experiment is valid"
    path = tmp_path / "exp.json"
    path.write_text(json.dumps(exp))
    code, out, err = run_cli(["drill", "validate", str(path), "-c", config])
    if code == 0:  # the title is shown, escaped, on its own one line
        line = next(line for line in out.splitlines() if "experiment " in line)
        assert (
            "\\x1b]52;c;ZXZpbA==\\x07" in line
            and "\\x9b2J" in line
            and "\\u202eevil [/] [red]x\\nerror" in line
        )
        assert not any(line.startswith("error:") for line in out.splitlines())
    else:  # refused: in one line, just as escaped
        assert code == 2 and len(err.strip().splitlines()) == 1, err
    for c in ("\x1b", "\x9b", "\x07", "\u202e"):
        assert c not in out + err


def test_a_refusal_is_one_line_whatever_the_value_holds(config: str) -> None:
    code, out, err = run_cli(["failover", "--to", f"x{OSC52}\nerror: none; failover succeeded", "-c", config])
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "\\x1b]52" in err and "\\nerror: none" in err and "\x1b" not in err


def test_config_schema_takes_o_and_keeps_format_as_a_deprecated_alias() -> None:
    code, as_json, err = run_cli(["config", "schema", "-o", "json"])
    assert code == 0 and json.loads(as_json)["title"], err
    code, markdown, err = run_cli(["config", "schema", "-o", "markdown"])
    assert code == 0 and markdown.lstrip().startswith("#") and err == "", err
    code, old, err = run_cli(["config", "schema", "--format", "markdown"])
    assert code == 0 and old == markdown and "--format is deprecated; use -o/--output" in err
    code, out, err = run_cli(["config", "schema", "-h"])
    assert code == 0 and "--format" not in out and "-o, --output" in out
