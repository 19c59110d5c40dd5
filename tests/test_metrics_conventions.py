"""drctl's metric names follow Prometheus's conventions, as promtool lints them, and the build is
identified by drctl_build_info."""

from __future__ import annotations

import shutil
import subprocess
from importlib import metadata

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from drctl.telemetry import metrics


def _every_metric_once() -> bytes:
    """A registry holding each of drctl's metrics with one labelled child, so each is exposed."""
    registry = CollectorRegistry()
    for value in vars(metrics).values():
        if not isinstance(value, Counter | Gauge | Histogram):
            continue
        kind = type(value)
        name = value._name  # noqa: SLF001 - prometheus_client has no public getter
        labels = value._labelnames  # noqa: SLF001
        doc = value._documentation  # noqa: SLF001
        copy = kind(name, doc, labels, registry=registry)
        if labels:
            copy.labels(*["x"] * len(labels))
    return generate_latest(registry)


def test_promtool_finds_no_naming_problem() -> None:
    promtool = shutil.which("promtool") or pytest.fail("promtool is not installed (make deps)")
    exposed = _every_metric_once()
    assert b"drctl_region_failing_ratio" in exposed and b"fraction" not in exposed
    done = subprocess.run([promtool, "check", "metrics"], input=exposed, capture_output=True, timeout=60)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_build_info_names_the_running_version() -> None:
    text = generate_latest().decode()
    version = metadata.version("drctl")
    line = next(ln for ln in text.splitlines() if ln.startswith("drctl_build_info{"))
    assert f'version="{version}"' in line and line.endswith(" 1.0"), line
