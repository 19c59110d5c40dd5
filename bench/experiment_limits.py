"""How long a drill experiment just under the parsing limits takes to judge, against the old reader.

    .venv/bin/python bench/experiment_limits.py

For each shape (bytes just under the size limit; values just under the values limit, broken on its
last line so it is refused only at the end; an alias expansion just under and just over the values
limit; nesting just under the depth limit) it builds a YAML experiment and prints the CPU time of
drctl.chaos.validate.validate_experiment, the whole judgement `drctl drill validate` makes, best
of `--repeat`. Beside it, the baseline: the same shape at the previous size limit (1 MiB) parsed by
the previous reader (PyYAML's pure-Python parser), parse only. A timed test would be flaky on a
shared machine, so this prints instead of asserting.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as `python bench/experiment_limits.py`: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import yaml

from drctl.chaos.validate import EXPERIMENT_LIMITS, ExperimentInvalid, validate_experiment
from drctl.config.safeload import DocumentError, load_yaml
from drctl.config.schema import FleetConfig, parse_config

ROOT = Path(__file__).resolve().parent.parent
OLD_LIMITS = dataclasses.replace(EXPERIMENT_LIMITS, max_bytes=1 << 20)
_CONFIG = """name: bench
regions:
  - {name: us-west-1, weight: 60, gateway_url: 'http://127.0.0.1:8401', kube: {api_url: 'http://127.0.0.1:9401'}}
  - {name: us-east-1, weight: 40, gateway_url: 'http://127.0.0.1:8402', kube: {api_url: 'http://127.0.0.1:9402'}}
traffic:
  global_endpoint: http://127.0.0.1:8400
  global: {kind: haproxy, runtime_socket: /tmp/g.sock}
  regional: {kind: gateway-api}
drills: {allowed_targets: [us-west-1], fault_injector: devstack}
"""


def _base() -> str:
    return yaml.safe_dump(
        json.loads((ROOT / "experiments" / "region-outage.json").read_text()), sort_keys=False
    )


def _fill(max_bytes: int, item: Callable[[int], str], tail: str = "") -> str:
    """The shipped experiment with as many `tags` items as fit under `max_bytes` (and `tail` after),
    or until `item` gives ""."""
    head, rest = _base().split("tags:\n", 1)
    budget = max_bytes - len(head) - len(rest) - len(tail) - 16
    items: list[str] = []
    size = 0
    while (next_item := item(len(items))) and size + len(next_item) < budget:
        items.append(next_item)
        size += len(next_item)
    return head + "tags:\n" + "".join(items) + rest + tail


def _aliases(width: int) -> str:
    """Three levels of `width` aliases each: width**3 values once expanded, in about 2 KB."""
    anchors = "  a0: &a0 [" + ",".join(["v"] * width) + "]\n"
    for i in (1, 2):
        anchors += f"  a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]\n"
    return _base().replace("  expect_failover: true\n", "  expect_failover: true\n" + anchors, 1)


def shapes(max_bytes: int) -> dict[str, str]:
    nodes = EXPERIMENT_LIMITS.max_nodes
    width_under = int((nodes - 300) ** (1 / 3))
    deep = EXPERIMENT_LIMITS.max_depth - 4  # the extension sits 4 levels down
    return {
        "bytes just under the size limit": _fill(max_bytes, lambda i: f"- tag-{i:07d}-abcdefghijklmno\n"),
        "values just under, broken last line": _fill(
            min(max_bytes, 4 * nodes + 4_000), lambda i: "- v\n" if i < nodes - 400 else "", "broken: [\n"
        ),
        f"aliases: {width_under}^3 values": _aliases(width_under),
        f"aliases: {width_under + 2}^3 values (bomb)": _aliases(width_under + 2),
        "nesting just under the depth limit": _base().replace(
            "  expect_failover: true\n",
            "  expect_failover: true\n  deep: " + "[" * deep + "]" * deep + "\n",
            1,
        ),
    }


def _best(fn: Callable[[], str], repeat: int) -> tuple[float, str]:
    best, outcome = float("inf"), ""
    for _ in range(repeat):
        cpu = time.process_time()
        outcome = fn()
        best = min(best, time.process_time() - cpu)
    return best, outcome


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench/experiment_limits.py", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--repeat", type=int, default=3, choices=range(1, 21), metavar="1..20", help="runs per figure"
    )
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = parse_config(_CONFIG, "bench.yaml")
    with tempfile.TemporaryDirectory(prefix="drctl-bench-limits-") as work:
        _table(cfg, Path(work) / "experiment.yaml", args.repeat)
    return 0


def _table(cfg: FleetConfig, path: Path, repeat: int) -> None:
    """Print the figures, judging each shape from `path` (rewritten for each)."""
    now, old = shapes(EXPERIMENT_LIMITS.max_bytes), shapes(OLD_LIMITS.max_bytes)
    print(
        f"limits now: {EXPERIMENT_LIMITS.max_bytes:,} bytes, {EXPERIMENT_LIMITS.max_nodes:,} values, depth "
        f"{EXPERIMENT_LIMITS.max_depth}; baseline: {OLD_LIMITS.max_bytes:,} bytes, pure-Python parser, parse only"
    )
    print(f"{'shape':40} {'bytes':>9} {'judge s':>8}  {'outcome':40} {'bytes':>9} {'baseline s':>10}")
    for name, text in now.items():
        path.write_text(text)

        def judge() -> str:
            try:
                validate_experiment(path, cfg, "us-west-1")
                return "valid"
            except ExperimentInvalid as exc:
                return "refused: " + str(exc).split(": ", 1)[1][:31]

        def baseline(text: str = old[name]) -> str:
            try:
                load_yaml(text, OLD_LIMITS, fast=False)
                return "parsed"
            except DocumentError:
                return "refused"

        judged_s, outcome = _best(judge, repeat)
        base_s, _ = _best(baseline, repeat)
        print(
            f"{name:40} {len(text):>9,} {judged_s:>8.3f}  {outcome:40} {len(old[name]):>9,} {base_s:>10.3f}"
        )


if __name__ == "__main__":
    sys.exit(main())
