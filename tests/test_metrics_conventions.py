"""drctl's metric names follow Prometheus's conventions, as promtool lints them, and the build is
identified by drctl_build_info."""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from drctl.telemetry import metrics

ROOT = Path(__file__).resolve().parents[1]


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


def _table_rows(text: str) -> dict[str, list[str]]:
    """docs/metrics.md's metric table: each metric name in a row's first cell -> that row's cells."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `drctl_") and len(cells) == 3:
            for name in re.findall(r"`(drctl_[a-z0-9_]+)`", cells[0]):
                rows[name] = cells
    return rows


def test_the_metrics_table_lists_every_metric_with_its_labels() -> None:
    """An alert or a dashboard panel reads a metric the table does not list: that was a false doc."""
    rows = _table_rows((ROOT / "docs" / "metrics.md").read_text())
    missing, wrong = [], []
    for value in vars(metrics).values():
        if not isinstance(value, Counter | Gauge | Histogram):
            continue
        name = value._name + ("_total" if isinstance(value, Counter) else "")  # noqa: SLF001
        if name not in rows:
            missing.append(name)
            continue
        labels = [x.strip() for x in rows[name][2].split(",") if x.strip()]
        if labels != list(value._labelnames):  # noqa: SLF001
            wrong.append(f"{name}: table {labels}, code {list(value._labelnames)}")  # noqa: SLF001
    assert not missing, f"docs/metrics.md lists no row for {missing}"
    assert not wrong, wrong
