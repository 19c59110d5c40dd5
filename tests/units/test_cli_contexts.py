"""Fleets by name: which config a command uses (flag, env, context, default) and the contexts file."""

from __future__ import annotations

from pathlib import Path

import pytest

from drctl.cli.common import UserError
from drctl.cli.contexts import Context, contexts_file, read, resolve, write
from tests.support.cli import run_cli
from tests.support.config import write_fleet_config


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """An environment whose config dir is empty, with two contexts written into it."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    write(
        contexts_file(env),
        "dev",
        {
            "dev": Context("dev", tmp_path / "dev.yaml"),
            "prod": Context("prod", tmp_path / "prod.yaml", "temporal.prod:7233", "drctl"),
        },
    )
    return env


def test_the_order_is_flag_env_context_default(home: dict[str, str], tmp_path: Path) -> None:
    flag = tmp_path / "flag.yaml"
    both = {**home, "DRCTL_CONFIG": "/env.yaml", "DRCTL_FLEET": "prod"}
    assert resolve(flag, None, both).path == flag  # -c beats everything
    assert resolve(None, "dev", both).path == tmp_path / "dev.yaml"  # --fleet beats the environment
    assert resolve(None, None, both).path == Path("/env.yaml")  # DRCTL_CONFIG, then DRCTL_FLEET
    got = resolve(None, None, {**home, "DRCTL_FLEET": "prod"})
    assert got.path == tmp_path / "prod.yaml" and got.context is not None
    assert (got.context.temporal_address, got.context.temporal_namespace) == ("temporal.prod:7233", "drctl")
    current = resolve(None, None, home)  # the current context
    assert current.path == tmp_path / "dev.yaml" and current.source == "context dev (current-context)"
    with pytest.raises(UserError, match="give -c"):
        resolve(flag, "dev", home)
    with pytest.raises(UserError, match=r"--fleet: no context 'qa' in .* \(known: dev, prod\)"):
        resolve(None, "qa", home)


def test_without_a_context_the_default_is_in_the_users_config_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # outside a checkout, whose config/fleet.yaml is the last resort
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    mine = tmp_path / "xdg" / "drctl" / "fleet.yaml"
    mine.parent.mkdir(parents=True)
    mine.write_text("name: x\n")
    assert resolve(None, None, env).path == mine
    assert (
        resolve(None, None, {"HOME": str(tmp_path / "h")}).path.parent == tmp_path / "h" / ".config" / "drctl"
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("contexts: [a]\n", "expected `contexts:`"),
        ("contexts: {prod: {}}\n", "contexts.prod: needs `config: <fleet config file>`"),
        ("contexts: {prod: {config: a.yaml, token: x}}\n", "unknown key(s) token"),
        ("current-context: qa\ncontexts: {prod: {config: a.yaml}}\n", "current-context 'qa' is not among"),
        ("contexts: {'bad name': {config: a.yaml}}\n", "context name 'bad name'"),
        ("contexts: {prod: {config: [\n", "cannot read contexts"),
    ],
)
def test_a_broken_contexts_file_is_named_with_what_is_wrong(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as caught:
        read(path)
    assert str(caught.value).startswith(str(path)) and words in str(caught.value)


def test_relative_config_paths_are_relative_to_the_contexts_file(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("contexts: {prod: {config: fleets/prod.yaml}}\n")
    assert read(path)[1]["prod"].config == tmp_path / "fleets" / "prod.yaml"


def test_the_commands_name_use_and_list_fleets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("DRCTL_CONFIG", raising=False)
    monkeypatch.delenv("DRCTL_FLEET", raising=False)
    monkeypatch.chdir(tmp_path)  # outside any checkout: no config/fleet.yaml to fall back to
    code, out, err = run_cli(["config", "validate"])
    assert code == 2 and err.startswith("error: no fleet config: pass -c FILE or --fleet NAME"), err
    fleet = write_fleet_config()
    code, out, err = run_cli(
        ["config", "set-context", "prod", "-c", str(fleet), "--temporal-address", "127.0.0.1:9"]
    )
    assert code == 0, err
    assert run_cli(["config", "use-context", "qa"])[0] == 2
    code, out, err = run_cli(["--fleet", "prod", "config", "validate", "-o", "json"])
    assert code == 0 and '"valid": true' in out, err
    # The context's Temporal address is the one used: a closed port here, exit 3, named.
    code, out, err = run_cli(["--fleet", "prod", "status"])
    assert code == 3 and "127.0.0.1:9" in err, err
    assert run_cli(["config", "use-context", "prod"])[0] == 0
    code, out, err = run_cli(["config", "get-contexts", "-o", "json"])
    assert (
        code == 0 and '"current_context": "prod"' in out and f'"config_in_use": "{fleet.resolve()}"' in out
    ), out
    code, out, err = run_cli(["config", "validate", "-o", "json"])  # the current context, no flag
    assert code == 0, err
