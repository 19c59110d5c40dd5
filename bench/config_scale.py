"""How long the fleet-config loader takes to judge a big fleet, against a small baseline.

    .venv/bin/python bench/config_scale.py --regions 20000

Builds a config with `--baseline` regions and one with `--regions` regions (the same shape, each
region with a gateway URL, a namespace and a task queue), parses and validates each with
drctl.config.schema.parse_config (the loader `drctl config validate` uses), and prints the time
of each, the bytes, and the ratio against a linear extrapolation of the baseline. A ratio near 1
means validation is linear in the config's size; a quadratic check shows as a ratio near N/baseline.
A timed test would be flaky on a shared machine, so this prints instead of asserting.
"""

from __future__ import annotations

import argparse
import sys
import time

if __package__ in (None, ""):  # run as `python bench/config_scale.py`: make the repo root importable
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parent.parent))

from drctl.config.schema import parse_config


def fleet_text(regions: int) -> str:
    """A valid fleet config with `regions` regions, every one an allowed drill target."""
    lines = ["name: scale", "regions:"]
    for i in range(regions):
        lines += [
            f"  - name: r{i}",
            "    weight: 1",
            f"    gateway_url: http://10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}:8080",
            f"    task_queue: drctl-r{i}",
            f"    kube: {{api_url: 'http://127.0.0.1:{1024 + i % 60000}', namespace: ns-{i % 97}}}",
        ]
    lines += [
        "traffic:",
        "  global_endpoint: http://127.0.0.1:8400",
        "  global: {kind: haproxy, runtime_socket: /tmp/g.sock}",
        "  regional: {kind: gateway-api}",
        "drills:",
        "  allowed_targets: [" + ", ".join(f"r{i}" for i in range(regions)) + "]",
    ]
    return "\n".join(lines) + "\n"


def judge(regions: int) -> tuple[float, float, int]:
    """Wall and CPU seconds to parse and validate `regions` regions, and the config's size."""
    text = fleet_text(regions)
    started, cpu = time.perf_counter(), time.process_time()
    cfg = parse_config(text, "scale.yaml")
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    if len(cfg.regions) != regions:
        raise SystemExit(f"loaded {len(cfg.regions)} regions, not {regions}")
    return elapsed, cpu, len(text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="bench/config_scale.py", description=__doc__.splitlines()[0])
    ap.add_argument("--regions", type=int, default=20_000, help="regions in the big config")
    ap.add_argument("--baseline", type=int, default=1_000, help="regions in the baseline config")
    args = ap.parse_args(argv)
    if not 1 <= args.baseline < args.regions <= 50_000:
        ap.error("need 1 <= --baseline < --regions <= 50000 (the schema's limit)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    base_s, base_cpu, base_bytes = judge(args.baseline)
    big_s, big_cpu, big_bytes = judge(args.regions)
    linear = base_cpu * args.regions / args.baseline
    print(
        f"baseline {args.baseline:>6} regions {base_bytes:>10,} bytes {base_s:8.3f} s ({base_cpu:.3f} s CPU)"
    )
    print(f"fleet    {args.regions:>6} regions {big_bytes:>10,} bytes {big_s:8.3f} s ({big_cpu:.3f} s CPU)")
    print(f"CPU time against a linear extrapolation of the baseline: {big_cpu / linear:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
