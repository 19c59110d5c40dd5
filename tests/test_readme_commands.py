"""Every drctl command and option the README shows is a real one, and some test runs it.

The README is read for `drctl ...` in code spans and shell blocks; each is resolved against the real
click tree (so a renamed option fails here), and the test sources are scanned for a command line
with the same command path and that option: a string-literal argv such as
`run_cli(["failover", "--to", "us-east-1", "--from", "us-west-1"])` or `drctl("ops", "show", wid)`.
The scan is static, so it is fast; whether the test asserts an effect is for review to judge.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from drctl.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
# Argv prefixes that only say how the binary is run.
_RUNNER = {"-m", "drctl", "drctl.cli.main", "drctl.__main__"}


@dataclass(frozen=True)
class Use:
    path: tuple[str, ...]
    options: frozenset[str]
    text: str


def _tree() -> Any:
    return typer.main.get_command(app)


def _is_option(param: Any) -> bool:
    # Typer may vendor click (typer._click), so match by kind rather than by class.
    return getattr(param, "param_type_name", "") == "option"


def _resolve(tokens: list[str], root: Any) -> tuple[tuple[str, ...], Any, list[str]] | None:
    """(command path, command, the remaining tokens); None when the first token is no command."""
    cmd, path, i = root, [], 0
    while i < len(tokens) and hasattr(cmd, "commands") and tokens[i] in cmd.commands:
        cmd = cmd.commands[tokens[i]]
        path.append(tokens[i])
        i += 1
    return (tuple(path), cmd, tokens[i:]) if path else None


def _long_options(cmd: Any, tokens: list[str]) -> set[str]:
    """The options among tokens, by their first long name; unknown ones are kept as written."""
    names: dict[str, str] = {}
    for p in cmd.params:
        if _is_option(p):
            canonical = next((o for o in p.opts if o.startswith("--")), p.opts[0])
            for o in (*p.opts, *p.secondary_opts):
                names[o] = canonical
    return {
        names.get(t.split("=", 1)[0], t.split("=", 1)[0]) for t in tokens if t.startswith("-") and len(t) > 1
    }


def _readme_uses() -> list[Use]:
    text = (ROOT / "README.md").read_text()
    spans = [" ".join(s.split()) for s in re.findall(r"`(drctl [^`]+)`", text)]
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        spans += [ln.split("  #")[0].strip() for ln in block.splitlines() if ln.strip().startswith("drctl ")]
    root, uses = _tree(), []
    for span in spans:
        words = re.sub(r"[\[\]]", " ", span.replace("\\|", "|")).split()[1:]
        # `monitor start|stop|status`: one use per alternative of a command word.
        variants = [[]]
        for w in words:
            alts = w.split("|") if not w.startswith("-") else [w]
            variants = [[*v, a] for v in variants for a in alts]
        for tokens in variants:
            found = _resolve(tokens, root)
            if found is None:
                continue  # prose such as "drctl CLI" or a benchmark row, not a command line
            path, cmd, rest = found
            uses.append(Use(path, frozenset(_long_options(cmd, rest)), span))
    return uses


_RUNNERS = {"run_cli", "cli", "drctl", "drctl_async", "DRCTL"}


def _is_runner(e: ast.expr) -> bool:
    """What the tests run drctl through.

    `run_cli`, `cli`, `drctl`, `drctl_async`, `DRCTL`, `str(DRCTL)`, `*DRCTL`, `str(BIN / "drctl")`.
    """
    if isinstance(e, ast.Starred):
        return _is_runner(e.value)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "str" and e.args:
        return _is_runner(e.args[0])
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div):  # BIN / "drctl"
        return isinstance(e.right, ast.Constant) and e.right.value == "drctl"
    return (isinstance(e, ast.Name) and e.id in _RUNNERS) or (
        isinstance(e, ast.Attribute) and e.attr in _RUNNERS
    )


def _words(items: list[ast.expr]) -> list[str]:
    if len(items) == 1 and isinstance(items[0], ast.List | ast.Tuple):
        items = list(items[0].elts)
    return [e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _argvs(source: str) -> list[list[str]]:
    """The drctl command lines a test module runs: string-literal argv passed to a runner.

    `run_cli([...])`, `cli(...)`, `drctl(...)`, `asyncio.to_thread(drctl, ...)`, `create_subprocess_exec(DRCTL, ...)`,
    `[DRCTL, ...]` and `[sys.executable, "-m", "drctl", ...]`. Other string lists (a table of operation
    names, say) are not command lines, so they do not count.
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        argv: list[str] | None = None
        if isinstance(node, ast.Call):
            if _is_runner(node.func):
                argv = _words(list(node.args))
            elif node.args and _is_runner(node.args[0]):
                argv = _words(list(node.args[1:]))
        elif isinstance(node, ast.List | ast.Tuple) and node.elts:
            head = _words(list(node.elts[1:3]))
            if _is_runner(node.elts[0]):
                argv = _words(list(node.elts[1:]))
            elif head[:1] == ["-m"] and len(head) == 2 and head[1] in _RUNNER:
                argv = _words(list(node.elts[3:]))
        if argv:
            while argv and argv[0] in _RUNNER:
                argv.pop(0)
            found.append(argv)
    return found


def _tested_uses(sources: list[str]) -> dict[tuple[str, ...], set[str]]:
    """Command path → every option some test passes to it."""
    root, tested = _tree(), {}
    for src in sources:
        for argv in _argvs(src):
            found = _resolve(argv, root)
            if found is not None:
                path, cmd, rest = found
                tested.setdefault(path, set()).update(_long_options(cmd, rest))
    return tested


def _test_sources() -> list[str]:
    return [p.read_text() for p in sorted(TESTS.rglob("*.py")) if p.resolve() != Path(__file__).resolve()]


def test_readme_shows_only_real_commands_and_options() -> None:
    uses = _readme_uses()
    assert len({u.path for u in uses}) >= 30, sorted({u.path for u in uses})
    root = _tree()
    for u in uses:
        _, cmd, _ = _resolve(list(u.path), root)  # type: ignore[misc]
        real = {o for p in cmd.params if _is_option(p) for o in (*p.opts, *p.secondary_opts)}
        assert u.options <= real, (
            f"README `{u.text}`: {sorted(u.options - real)} is no option of drctl {' '.join(u.path)}"
        )


def test_every_readme_command_and_option_is_run_by_a_test() -> None:
    tested = _tested_uses(_test_sources())
    missing = sorted(
        {
            f"drctl {' '.join(u.path)} {o}".strip()
            for u in _readme_uses()
            for o in (u.options or {""})
            if u.path not in tested or (o and o not in tested[u.path])
        }
    )
    assert not missing, "README commands/options no test runs:\n" + "\n".join(missing)


def test_the_scan_tells_a_tested_option_from_an_untested_one() -> None:
    # The check above must be able to fail: an argv only counts for its own command and options.
    src = (
        'run_cli(["failover", "--to", "us-east-1", "--emergency"])\ndrctl("ops", "show", wid)\n'
        'KINDS = ["upgrade", "--force"]\n'
    )
    tested = _tested_uses([src])
    assert tested[("failover",)] == {"--to", "--emergency"}
    assert tested[("ops", "show")] == set()
    assert (
        ("ops", "abort") not in tested
        and ("upgrade",) not in tested
        and "--force" not in tested[("failover",)]
    )
    argv = '[sys.executable, "-m", "drctl", "drill", "schedule", "--cron", "0 3 * * MON", "-e", "x"]'
    assert _tested_uses([argv])[("drill", "schedule")] == {"--cron", "--experiment"}
