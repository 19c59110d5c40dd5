"""How long the fleet-config loader takes to judge big configs, beside the quadratic check it replaced.

    .venv/bin/python bench/config_scale.py --sizes 1000,10000,50000,100000

For each size N and each kind (N webhooks in a two-region fleet; a fleet of N regions, each with
its own gateway URL, Kubernetes API and namespace, and task queue) it builds the YAML, parses and
validates it with drctl.config.schema.parse_config (the loader `drctl config validate` and the
worker use), and prints the wall and CPU time and the time per item. Beside it is the baseline: the
uniqueness check done the old way on the same names, a scan of the list per item (the webhook-name
check was `names.count(n)` for every name: 20,000 webhooks took 7.6 s, 40,000 took 46 s). The
baseline is run up to --quadratic-max items and extrapolated (N²) beyond, marked "est.".

A fleet is limited to 50,000 regions (and a config to 1,000,000 YAML values), so 100,000 regions
are refused: the line shows how long the refusal takes. A timed test would be flaky on a shared
machine, so this prints instead of asserting.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

if __package__ in (None, ""):  # run as `python bench/config_scale.py`: make the repo root importable
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))

from drctl.config.schema import ConfigError, parse_config

_TAIL = [
    "traffic:",
    "  global_endpoint: http://127.0.0.1:8400",
    "  global: {kind: haproxy, runtime_socket: /tmp/g.sock}",
    "  regional: {kind: gateway-api}",
]


def _gateway(i: int) -> str:
    return f"http://10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}:8080"


def regions_text(n: int) -> tuple[str, list[str]]:
    """A fleet of `n` regions, every one an allowed drill target, and its gateway URLs."""
    lines = ["name: scale", "regions:"]
    for i in range(n):
        lines += [
            f"  - name: r{i}",
            "    weight: 1",
            f"    gateway_url: {_gateway(i)}",
            f"    task_queue: drctl-r{i}",
            f"    kube: {{api_url: 'http://127.0.0.1:{1024 + i % 60000}', namespace: ns-{i % 97}}}",
        ]
    lines += [*_TAIL, "drills:", "  allowed_targets: [" + ", ".join(f"r{i}" for i in range(n)) + "]"]
    return "\n".join(lines) + "\n", [_gateway(i) for i in range(n)]


def webhooks_text(n: int) -> tuple[str, list[str]]:
    """A two-region fleet with `n` webhooks, and their names."""
    lines = ["name: scale", "regions:"]
    for i in range(2):
        lines += [f"  - {{name: r{i}, weight: 1, gateway_url: '{_gateway(i)}', kube: {{namespace: ns-{i}}}}}"]
    lines += [*_TAIL, "notifications:", "  webhooks:"]
    names = [f"w{i}" for i in range(n)]
    lines += [f"    - {{name: {name}, url: 'http://127.0.0.1:9/{name}'}}" for name in names]
    return "\n".join(lines) + "\n", names


def quadratic_check(items: list[str]) -> list[str]:
    """The old way: one scan of the list per item (the webhook check before it used a Counter)."""
    return sorted({n for n in items if items.count(n) > 1})


def judge(text: str) -> tuple[float, float, str]:
    """Wall and CPU seconds to parse and validate `text`, and the verdict."""
    started, cpu = time.perf_counter(), time.process_time()
    try:
        parse_config(text, "scale.yaml")
        verdict = "valid"
    except ConfigError as exc:
        first = exc.problems[0]
        verdict = f"refused: {first.path}: {first.message[:60]}"
    return time.perf_counter() - started, time.process_time() - cpu, verdict


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench/config_scale.py", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes", default="1000,10000,50000,100000", help="comma-separated item counts (each 1..100000)"
    )
    ap.add_argument(
        "--quadratic-max", type=int, default=10_000, help="largest size the quadratic baseline really runs"
    )
    args = ap.parse_args(argv)
    try:
        args.sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        ap.error("--sizes takes comma-separated integers")
    if not args.sizes or not all(1 <= s <= 100_000 for s in args.sizes) or args.quadratic_max < 1:
        ap.error("need --sizes in 1..100000 and --quadratic-max >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    kinds: list[tuple[str, Callable[[int], tuple[str, list[str]]]]] = [
        ("webhooks", webhooks_text),
        ("regions", regions_text),
    ]
    print(
        f"{'kind':<9}{'items':>8}{'bytes':>12}{'wall s':>9}{'CPU s':>8}{'µs/item':>9}  {'quadratic s':>14}  verdict"
    )
    for kind, build in kinds:
        measured: tuple[int, float] | None = None  # (size, seconds) of the largest baseline run
        for n in sorted(args.sizes):
            text, items = build(n)
            wall, cpu, verdict = judge(text)
            if n <= args.quadratic_max:
                started = time.process_time()
                quadratic_check(items)
                measured = (n, time.process_time() - started)
                baseline = f"{measured[1]:.3f}"
            elif measured is not None:
                baseline = f"est. {measured[1] * (n / measured[0]) ** 2:.1f}"
            else:
                baseline = "-"
            per_item = cpu / n * 1e6
            print(
                f"{kind:<9}{n:>8}{len(text):>12,}{wall:>9.3f}{cpu:>8.3f}{per_item:>9.1f}  {baseline:>14}  {verdict}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
