"""Every command README.md and docs/*.md show is a real one, and some test runs it; their links resolve.

The pages are read for `drctl ...` in code spans and shell blocks; each is resolved against the real
click tree (so a renamed option fails here), and the test sources are scanned for a command line
with the same command path and that option: a string-literal argv such as
`run_cli(["failover", "--to", "us-east-1", "--from", "us-west-1"])` or `drctl("ops", "show", wid)`.
Every other command they show (a shell-block line, or a `make ...`, `python ...`, `.venv/bin/...`
span) must match a row of `OTHER_COMMANDS`, which names the test, or the CI script, that runs it and
what in its source shows it does. A benchmark's arguments are parsed by its own parser, and some test
must run it with each option shown (`BENCH_NOT_RUN` names the one exception and why). A make target
that runs pytest must be run by .ci/run; the drctl lines of any other must each be run by a test.
The scan is static, so it is fast; whether the test asserts an effect is for review to judge.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from drctl.cli.main import app
from tests.support.docs_text import README, ROOT, blocks, dead_links, name_of, pages, spans

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


def _drctl_spans(text: str) -> list[str]:
    """`drctl ...` code spans and shell-block lines of one page, comments dropped."""
    lines = [ln.split("  #")[0].strip() for block in blocks(text, "sh") for ln in block.splitlines()]
    found = [s for s in (*spans(text), *lines) if s.startswith(("drctl ", "python -m drctl "))]
    # `python -m drctl worker ...` is the same command line as `drctl worker ...`.
    return [s.removeprefix("python -m ") for s in found]


def _readme_uses() -> list[Use]:
    """Every drctl command line README.md and docs/*.md show, one Use per alternative."""
    root, uses = _tree(), []
    for path in pages():
        for span in _drctl_spans(path.read_text()):
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
                cmd_path, cmd, rest = found
                uses.append(Use(cmd_path, frozenset(_long_options(cmd, rest)), f"{name_of(path)}: {span}"))
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


@functools.cache
def _suite_tested() -> dict[tuple[str, ...], set[str]]:
    """`_tested_uses` of the whole suite, parsed once for the tests that need it."""
    return _tested_uses(_test_sources())


@functools.cache
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
            f"`{u.text}`: {sorted(u.options - real)} is no option of drctl {' '.join(u.path)}"
        )


def test_every_readme_command_and_option_is_run_by_a_test() -> None:
    tested = _suite_tested()
    missing = sorted(
        {
            f"drctl {' '.join(u.path)} {o}".strip()
            for u in _readme_uses()
            for o in (u.options or {""})
            if u.path not in tested or (o and o not in tested[u.path])
        }
    )
    assert not missing, "README/docs commands and options no test runs:\n" + "\n".join(missing)


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


# A command the pages show that is not a drctl command line: (pattern, file that runs it, what in that
# file shows it runs it, why that counts). Benchmarks and make targets are checked by their own rules.
OTHER_COMMANDS = [
    (
        r"promtool check rules deploy/prometheus/drctl-rules\.yaml",
        "tests/test_alerts.py",
        r'"check", "rules"',
        "runs promtool on the rules",
    ),
    (
        r"promtool test rules deploy/prometheus/tests/\*\.yaml",
        "tests/test_alerts.py",
        r'"test", "rules"',
        "runs the rule unit tests",
    ),
    (
        r"amtool check-config deploy/alertmanager/alertmanager\.yml",
        "tests/test_alerts.py",
        r'"check-config"',
        "runs amtool on the example",
    ),
    (
        r"kubectl kustomize deploy/kubernetes/overlays/[\w-]+",
        "tests/test_readme_production.py",
        r'"docs/production\.md"',
        "runs every shell line of docs/production.md",
    ),
    (
        r"python deploy/grafana/build\.py",
        "tests/test_observability.py",
        r'with_name\("build\.py"\)',
        "runs the generator and compares its output",
    ),
    (
        r"python -m drctl\.devstack\.fleetsim --host \S+ --port \S+",
        "tests/devstack/test_fleetsim.py",
        r'"-m", "drctl\.devstack\.fleetsim", "--host", "127\.0\.0\.1", "--port"',
        "starts fleetsim so",
    ),
    (
        r"python -m drctl\.devstack\.region --config \S+ --region \S+",
        "tests/support/regionproc.py",
        r'"drctl\.devstack\.region",',
        "starts a region process so",
    ),
    (
        r"python -m drctl\.devstack\.s3_auth_proxy --host \S+ --port \S+ --issued-file \S+",
        "drctl/devstack/stack.py",
        r'"drctl\.devstack\.s3_auth_proxy",\s+"--host",',
        "is the dev stack's moto component, which every test on the session stack starts (stack.up)",
    ),
    (
        r"\.venv/bin/python deploy/kubernetes/components/kube-prometheus-stack/build\.py( --check)?",
        "tests/test_kube_prometheus_stack.py",
        r'\[sys\.executable, str\(BUILD\), "--check"\]',
        "runs the generator with --check (the same output, compared instead of written)",
    ),
    (
        r"\.venv/bin/python docs/pictures/temporal_ui\.py",
        "tests/test_docs_pictures.py",
        r"docs/pictures/temporal_ui\.py",
        "needs Chromium and a dev stack of its own for minutes: the test checks the screenshots' "
        "manifest entries name the script, and the build's --check compares its hash",
    ),
    (
        r"\.venv/bin/python docs/pictures/build\.py( --check)?",
        "tests/test_docs_pictures.py",
        r'\[sys\.executable, str\(BUILD\), "--check"\]',
        "runs the build with --check (every picture drawn again or its inputs hashed, and compared)",
    ),
    (
        r"\.venv/bin/pip-compile --allow-unsafe --generate-hashes .*requirements/build\.lock.*",
        "tests/test_worker_image.py",
        r"build\.lock",
        "checks build.lock's header is this command; a run resolves against the index, so no test runs it",
    ),
    (
        r"docker buildx (build|imagetools inspect) .*",
        "tests/test_worker_image.py",
        r"docker buildx build",
        "no container runtime on the test machines: the test checks the pushed tag is what every overlay names",
    ),
    (
        r"\.venv/bin/pip-compile --generate-hashes .*requirements/worker\.lock.*",
        "tests/test_worker_image.py",
        r"pip-compile",
        "checks the lock's header is this command; a run resolves against the index for minutes, so no test runs it",
    ),
    (
        r"DRCTL_CONFIG=\S+ DRCTL_DRILL_TARGET=[\w-]+ \.venv/bin/chaos run --rollback-strategy always "
        r"experiments/control-plane-loss\.json",
        "tests/drills/test_control_plane_drill.py",
        r'"--rollback-strategy", "always", str\(EXPERIMENT\)',
        "runs the experiment with the real `chaos run` on a dev stack of its own, target and config from the env",
    ),
    (
        r"\.venv/bin/pytest -q",
        "Makefile",
        r"\$\(BIN\)/pytest -q",
        "`make test`, `make test-e2e`, `make test-stacks` and `make test-crash` run its four shards",
    ),
]
_BENCH = re.compile(r"(?:\.venv/bin/)?python bench/(\w+)\.py(.*)")
_OTHER = re.compile(r"(?:make|python|\.venv/bin/python) |\.venv/bin/pytest\b")


def _other_commands() -> list[tuple[str, str]]:
    """(page, command) for every non-drctl line of a shell block and every make/python span."""
    found = []
    for path in pages():
        text = path.read_text()
        lines = [ln.split("  #")[0].strip() for block in blocks(text, "sh") for ln in block.splitlines()]
        lines += [s for s in spans(text) if _OTHER.match(s)]
        found += [
            (name_of(path), c) for c in lines if c and not c.startswith(("#", "drctl ", "python -m drctl "))
        ]
    return found


def _make_recipes() -> dict[str, list[str]]:
    recipes: dict[str, list[str]] = {}
    current: str | None = None
    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("\t") and current:
            recipes[current].append(line.strip())
        elif m := re.match(r"^([\w-]+):(?!=)", line):
            current = m.group(1)
            recipes[current] = []
        elif line.strip():
            current = None
    return recipes


def _make_problems(cmd: str, tested: dict[tuple[str, ...], set[str]]) -> list[str]:
    """A make target shown must exist; one that runs pytest must be run by .ci/run, and the drctl
    command lines of any other (`make demo`) must each be run by some test."""
    recipes, ci = _make_recipes(), (ROOT / ".ci" / "run").read_text()
    ci_targets = {t for m in re.finditer(r"^make ([\w -]+)$", ci, re.M) for t in m.group(1).split()}
    problems = []
    for target in cmd.split()[1:]:
        recipe = recipes.get(target)
        if recipe is None:
            problems.append(f"no make target {target!r}")
        elif any("pytest" in ln for ln in recipe):
            if target not in ci_targets:
                problems.append(f".ci/run does not run `make {target}`")
        else:
            for ln in (ln for ln in recipe if ln.startswith("$(BIN)/drctl ")):
                found = _resolve(ln.split()[1:], _tree())
                if found is None:
                    problems.append(f"make {target}: `{ln}` is no drctl command")
                    continue
                path, c, rest = found
                untested = sorted(_long_options(c, rest) - tested.get(path, set()))
                if path not in tested:
                    problems.append(f"make {target}: `{ln}`: no test runs drctl {' '.join(path)}")
                elif untested:
                    problems.append(f"make {target}: `{ln}`: no test passes {untested}")
    return problems


def _bench_script(e: ast.expr) -> str | None:
    """The benchmark an argv element names: `"bench/rto.py"` or `ROOT / "bench" / "rto.py"`."""
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "str" and e.args:
        return _bench_script(e.args[0])
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        m = re.fullmatch(r"bench/(\w+)\.py", e.value)
    elif isinstance(e, ast.BinOp) and isinstance(e.op, ast.Div) and isinstance(e.right, ast.Constant):
        left = e.left
        m = re.fullmatch(r"(\w+)\.py", str(e.right.value))
        m = m if isinstance(left, ast.BinOp) and getattr(left.right, "value", None) == "bench" else None
    else:
        m = None
    return m.group(1) if m else None


def _bench_runs(sources: list[str]) -> dict[str, set[str]]:
    """Benchmark → every option some test runs it with.

    A run is an argv naming the script (`[sys.executable, "bench/rto.py", "--trials", "1"]`, or a
    helper call `_run("bench/rto.py", ...)`), a call to a module's helper whose argv ends in `*args`
    (`_plot("--from", ...)`), or `main([...])` where the module imports main from that benchmark.
    """
    runs: dict[str, set[str]] = {}
    for src in (s for s in sources if "bench" in s):  # the rest cannot run one: not worth a parse
        tree = ast.parse(src)
        mains = {
            n.module.split(".")[1]
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom)
            and (n.module or "").startswith("bench.")
            and any(a.name == "main" for a in n.names)
        }
        helpers: dict[str, str] = {}
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            for seq in (n for n in ast.walk(fn) if isinstance(n, ast.List | ast.Tuple)):
                names = [b for b in map(_bench_script, seq.elts) if b]
                if names and seq.elts and isinstance(seq.elts[-1], ast.Starred):
                    helpers[fn.name] = names[0]
        for node in ast.walk(tree):
            items: list[ast.expr] = []
            if isinstance(node, ast.List | ast.Tuple):
                items = list(node.elts)
            elif isinstance(node, ast.Call):
                items = list(node.args)
                fname = node.func.id if isinstance(node.func, ast.Name) else None
                if fname in helpers:
                    runs.setdefault(helpers[fname], set()).update(_options(items))
                elif fname == "main" and len(mains) == 1 and items and isinstance(items[0], ast.List):
                    runs.setdefault(next(iter(mains)), set()).update(_options(list(items[0].elts)))
            for i, e in enumerate(items):
                if name := _bench_script(e):
                    runs.setdefault(name, set()).update(_options(items[i + 1 :]))
    return runs


def _spelled(e: ast.expr) -> list[str]:
    """The argv words an item spells: a string, or `*"--a 1 --b".split()`."""
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return [e.value]
    if (
        isinstance(e, ast.Starred)
        and isinstance(e.value, ast.Call)
        and isinstance(e.value.func, ast.Attribute)
        and e.value.func.attr == "split"
        and isinstance(e.value.func.value, ast.Constant)
        and isinstance(e.value.func.value.value, str)
        and not e.value.args
    ):
        return e.value.func.value.value.split()
    return []


def _options(items: list[ast.expr]) -> set[str]:
    return {w.split("=", 1)[0] for e in items for w in _spelled(e) if w.startswith("--")}


# A benchmark option a page shows that no test passes, and why no test can.
BENCH_NOT_RUN = {
    (
        "plot_failover",
        "--samples",
    ): "the trial mode (no --from) runs a real failover on a dev stack of its own",
}


def _bench_problems(name: str, args: str, runs: dict[str, set[str]]) -> list[str]:
    """A benchmark shown must take its arguments (its own parser says) and be run with them by a test."""
    try:
        importlib.import_module(f"bench.{name}").parse_args(shlex.split(args))
    except ModuleNotFoundError:
        return [f"there is no bench/{name}.py"]
    except SystemExit:
        return [f"bench/{name}.py refuses these arguments"]
    if name not in runs:
        return [f"no test runs bench/{name}.py"]
    shown = {a.split("=", 1)[0] for a in shlex.split(args) if a.startswith("--")}
    untested = sorted(o for o in shown - runs[name] if (name, o) not in BENCH_NOT_RUN)
    return [f"no test runs bench/{name}.py with {untested}"] if untested else []


def _other_problems(
    commands: list[tuple[str, str]], test_sources: list[str], tested: dict[tuple[str, ...], set[str]]
) -> tuple[list[str], set[str]]:
    """What is wrong with the non-drctl commands shown, and the OTHER_COMMANDS rows they used."""
    runners = {p: (ROOT / p).read_text() for p in {row[1] for row in OTHER_COMMANDS}}
    runs = _bench_runs(test_sources)
    problems, used = [], set()
    for page_name, cmd in commands:
        if cmd.startswith("make "):
            found = _make_problems(cmd, tested)
        elif bench := _BENCH.fullmatch(cmd):
            found = _bench_problems(bench.group(1), bench.group(2), runs)
        else:
            rows = [r for r in OTHER_COMMANDS if re.fullmatch(r[0], cmd)]
            found = [] if rows else ["no row of OTHER_COMMANDS says which test runs it"]
            for pattern, runner, evidence, _why in rows:
                used.add(pattern)
                if not re.search(evidence, runners[runner]):
                    found.append(f"{runner} no longer shows {evidence!r}")
        problems += [f"{page_name}: `{cmd}`: {why}" for why in found]
    return problems, used


def test_every_other_command_shown_is_run_by_a_test() -> None:
    problems, used = _other_problems(_other_commands(), _test_sources(), _suite_tested())
    assert not problems, "\n".join(problems)
    assert used == {row[0] for row in OTHER_COMMANDS}, "rows no page needs any more: remove them"
    runs, shown = _bench_runs(_test_sources()), [c for _, c in _other_commands()]
    for name, option in BENCH_NOT_RUN:
        assert option not in runs.get(name, set()), (
            f"a test runs bench/{name}.py {option} now: drop the exception"
        )
        assert any(re.search(rf"bench/{name}\.py .*{option}\b", c) for c in shown), f"{option}: shown nowhere"


def test_the_other_command_check_can_fail() -> None:
    shown = [
        ("p.md", "promtool check rules deploy/prometheus/drctl-rules.yaml"),  # a row, and test_alerts runs it
        ("p.md", "make demo"),  # its drctl lines: only `dev up` is run by the (planted) tests below
        ("p.md", "make down"),  # `dev down -c`: run, but without -c
        ("p.md", "make no-such-target"),
        ("p.md", "make lint"),  # runs no pytest and no drctl: nothing to check
        ("p.md", "python bench/rto.py --no-such-option 1"),
        ("p.md", "python bench/no_such_bench.py"),
        ("p.md", "python bench/history_cost.py --minutes 3"),  # parses, but no planted test runs it
        ("p.md", "python bench/probe_scale.py --sizes 100 --rounds 3"),  # run, but never with --rounds
        (
            "p.md",
            "python bench/plot_failover.py --from x --out y.png",
        ),  # run through its helper, not with --out
        ("p.md", "python bench/plot_failover.py --out y --samples s"),  # --samples: BENCH_NOT_RUN
        ("p.md", "frobnicate --all"),
    ]
    planted = [
        'run_cli(["dev", "up", "-c", "x"])',
        'cli("dev", "down")',
        'subprocess.run([sys.executable, "bench/probe_scale.py", "--sizes", "20"])',
        'def _plot(*args):\n    run([sys.executable, str(ROOT / "bench" / "plot_failover.py"), *args])\n'
        '_plot("--from", "x")',
    ]
    problems, used = _other_problems(shown, planted, _tested_uses(planted))
    assert [p.split(": ", 2)[2] for p in problems if "make demo" in p] == [
        "make demo: `$(BIN)/drctl monitor start -c $(CONFIG)`: no test runs drctl monitor start",
        "make demo: `$(BIN)/drctl replicate start -c $(CONFIG)`: no test runs drctl replicate start",
        "make demo: `$(BIN)/drctl status -c $(CONFIG)`: no test runs drctl status",
        "make demo: `$(BIN)/drctl failover -c $(CONFIG) --to us-east-1 --yes`: no test runs drctl failover",
        "make demo: `$(BIN)/drctl status -c $(CONFIG)`: no test runs drctl status",
    ]
    assert {
        cmd: why
        for cmd, why in (p.removeprefix("p.md: `").split("`: ", 1) for p in problems if "make demo" not in p)
    } == {
        "make down": "make down: `$(BIN)/drctl dev down -c $(CONFIG)`: no test passes ['--config']",
        "make no-such-target": "no make target 'no-such-target'",
        "python bench/rto.py --no-such-option 1": "bench/rto.py refuses these arguments",
        "python bench/no_such_bench.py": "there is no bench/no_such_bench.py",
        "python bench/history_cost.py --minutes 3": "no test runs bench/history_cost.py",
        "python bench/probe_scale.py --sizes 100 --rounds 3": "no test runs bench/probe_scale.py with ['--rounds']",
        "python bench/plot_failover.py --from x --out y.png": "no test runs bench/plot_failover.py with ['--out']",
        "python bench/plot_failover.py --out y --samples s": "no test runs bench/plot_failover.py with ['--out']",
        "frobnicate --all": "no row of OTHER_COMMANDS says which test runs it",
    }
    assert used == {OTHER_COMMANDS[0][0]}


def test_readme_fits_on_a_few_screens() -> None:
    lines = README.read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines; move a subject into docs/ (its map is in the README)"


def test_every_relative_link_points_at_a_file_or_heading() -> None:
    dead = [f"{name_of(p)}: {d}" for p in pages() for d in dead_links(p)]
    assert not dead, "\n".join(dead)
    readme_links = {t.partition("#")[0] for t in re.findall(r"\]\((docs/[^)#]+)", README.read_text())}
    unmapped = {name_of(p) for p in pages()[1:]} - readme_links
    assert not unmapped, f"docs pages the README's map does not link: {sorted(unmapped)}"


def test_the_link_check_finds_a_dead_file_and_a_dead_anchor(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A `config.key` section\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# Doc\n[ok](other.md#a-configkey-section) [self](#doc) [web](https://example.com/x)\n"
        "[gone](missing.md) [no heading](other.md#nothing) `[in code](missing2.md)`\n"
        "```\n[in a block](missing3.md)\n```\n"
    )
    assert [d.split(":")[0] for d in dead_links(doc)] == ["missing.md", "other.md#nothing"]
