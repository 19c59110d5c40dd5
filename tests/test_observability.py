"""Metrics end to end: `drctl dev up` with its workers and Prometheus, as a user runs it.

Prometheus's HTTP API must return drctl's metrics (scraped from the workers) and vLLM's TTFT
histogram (scraped from every replica); a failover counts exactly once; every dashboard query runs.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from drctl.config.schema import FleetConfig, load_config
from drctl.devstack import prometheus, stack
from tests.support.cli import drctl
from tests.support.config import write_fleet_config
from tests.support.wait import wait_until
from tests.support.workers import admin

DASHBOARD = Path(__file__).resolve().parent.parent / "deploy" / "grafana" / "drctl.json"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def observed() -> Iterator[tuple[FleetConfig, Path]]:
    """Its own stack, with one worker per region and the monitor running, as `make demo` has it."""
    path = write_fleet_config(overrides={"health": {"interval_s": 3}})
    cfg = load_config(path)
    try:
        up = drctl("dev", "up", "-c", str(path))
        assert up.returncode == 0, up.stdout + up.stderr
        assert prometheus.url(cfg) in up.stdout
        started = drctl("monitor", "start", "-c", str(path), timeout_s=60)
        assert started.returncode == 0, started.stdout + started.stderr
        yield cfg, path
    finally:
        stack.down(cfg)
        shutil.rmtree(path.parent, ignore_errors=True)


def _query(cfg: FleetConfig, expr: str) -> dict[str, Any]:
    r = httpx.get(f"{prometheus.url(cfg)}/api/v1/query", params={"query": expr}, timeout=10)
    body = r.json()
    assert r.status_code == 200 and body["status"] == "success", f"{expr}: {body.get('error') or r.text}"
    return body["data"]


def _vector(cfg: FleetConfig, expr: str) -> list[dict[str, Any]]:
    return _query(cfg, expr)["result"]


def test_prometheus_has_drctl_region_state_and_vllm_ttft(observed: tuple[FleetConfig, Path]) -> None:
    cfg, path = observed
    states = wait_until(
        lambda: _vector(cfg, 'max by (region, state) (drctl_region_state{fleet="test"}) == 1'),
        timeout_s=60,
        interval_s=1,
        what="drctl_region_state in Prometheus",
    )
    assert {s["metric"]["region"] for s in states} == set(cfg.region_names)
    assert {s["metric"]["state"] for s in states} == {"HEALTHY"}
    ttft = wait_until(
        lambda: _vector(cfg, "vllm:time_to_first_token_seconds_bucket"),
        timeout_s=60,
        interval_s=1,
        what="vLLM TTFT histogram in Prometheus",
    )
    # Every replica of every region is a scrape target (file_sd written by the node agents), by
    # the name of its Pod.
    pods = {(r.name, p["pod"]) for r in cfg.regions for p in admin(cfg, r.name, "/replicas")}
    assert len(pods) == sum(r.replicas for r in cfg.regions)
    assert {(s["metric"]["region"], s["metric"]["pod"]) for s in ttft} == pods

    def every_region_probed() -> dict[str, float] | None:
        found = {
            s["metric"]["region"]: float(s["value"][1])
            for s in _vector(cfg, 'max by (region) (drctl_region_ttft_p50_seconds{fleet="test"})')
        }
        return found if set(found) == set(cfg.region_names) else None

    probed = wait_until(
        every_region_probed, timeout_s=30, interval_s=1, what="the probe's TTFT p50 of every region"
    )
    assert all(0 < v < 5 for v in probed.values()), probed
    assert _vector(cfg, 'max(drctl_monitor_running{fleet="test"}) == 1')

    status = drctl("dev", "status", "-c", str(path), "-o", "json")
    assert status.returncode == 0 and json.loads(status.stdout)["prometheus_url"] == prometheus.url(cfg)


def test_worker_endpoint_health_readiness_and_sdk_metrics(observed: tuple[FleetConfig, Path]) -> None:
    cfg, _ = observed
    for region in cfg.region_names:
        base = f"http://127.0.0.1:{prometheus.worker_port(cfg, region)}"
        assert httpx.get(f"{base}/healthz", timeout=5).status_code == 200
        ready = httpx.get(f"{base}/readyz", timeout=5)
        assert ready.status_code == 200 and cfg.region(region).queue in ready.text, ready.text
        text = httpx.get(f"{base}/metrics", timeout=10).text
        assert "drctl_region_weight{" in text
        # The Temporal SDK's own metrics, merged from the runtime's exporter.
        assert "temporal_request_latency_seconds_bucket" in text and "temporal_num_pollers{" in text


def _total(cfg: FleetConfig, expr: str) -> float:
    found = _vector(cfg, f"sum({expr})")
    return float(found[0]["value"][1]) if found else 0.0


def test_failover_counts_once_with_its_rto(observed: tuple[FleetConfig, Path]) -> None:
    cfg, path = observed
    succeeded = 'drctl_failovers_total{fleet="test",result="succeeded"}'
    wait_until(lambda: _vector(cfg, succeeded), timeout_s=30, interval_s=1, what="failover counters exported")
    before, rtos_before = (
        _total(cfg, succeeded),
        _total(cfg, 'drctl_failover_rto_seconds_count{fleet="test"}'),
    )
    done = drctl("failover", "-c", str(path), "--to", "us-east-1", "--yes", timeout_s=180)
    assert done.returncode == 0, done.stdout + done.stderr
    wait_until(
        lambda: _total(cfg, succeeded) == before + 1,
        timeout_s=30,
        interval_s=1,
        what="drctl_failovers_total{result=succeeded} up by one",
    )
    assert _total(cfg, 'drctl_failover_rto_seconds_count{fleet="test"}') == rtos_before + 1
    weights = wait_until(
        lambda: (
            {
                s["metric"]["region"]: float(s["value"][1])
                for s in _vector(cfg, 'max by (region) (drctl_region_weight{fleet="test"})')
            }
            == {"us-west-1": 0, "us-east-1": 100}
        ),
        timeout_s=30,
        interval_s=1,
        what="weights 0/100 in Prometheus",
    )
    assert weights
    # Nothing else moved: one failover, one success.
    assert _total(cfg, 'drctl_failovers_total{fleet="test"}') == before + 1


def _panel_queries() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    queries = [(p["title"], t["expr"]) for p in dash["panels"] for t in p["targets"]]
    return queries + [
        (f"annotation {a['name']}", a["expr"]) for a in dash["annotations"]["list"] if "expr" in a
    ]


def test_every_panel_filters_by_fleet_and_the_dashboard_shows_lag_and_failovers() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert [v["name"] for v in dash["templating"]["list"]] == ["datasource", "fleet"]
    for title, expr in _panel_queries():
        assert 'fleet="$fleet"' in expr, f"{title}: {expr} ignores the fleet filter"
    lag = next(p for p in dash["panels"] if p["title"] == "Replication lag vs RPO target")
    assert {"drctl_replication_lag_seconds", "drctl_rpo_target_seconds"} <= {
        m for t in lag["targets"] for m in re.findall(r"drctl_\w+", t["expr"])
    }
    failovers = next(a for a in dash["annotations"]["list"] if a["name"] == "Failovers")
    assert "drctl_last_failover_timestamp_seconds" in failovers["expr"] and failovers["enable"]


def test_every_dashboard_query_runs(observed: tuple[FleetConfig, Path]) -> None:
    cfg, _ = observed
    # These panels draw from what runs all the time, so they must show data, not just parse.
    always = {"Region state", "Global weights", "TTFT per region", "Replicas failing"}

    def panels_show_data() -> bool:
        empty = []
        for title, expr in _panel_queries():  # every query must run: one Prometheus refuses fails every pass
            # Grafana's own variables, as Grafana would substitute them.
            q = expr.replace("$fleet", cfg.name).replace("$__rate_interval", "1m").replace("$__range", "1h")
            if not _query(cfg, q)["result"]:
                empty.append(title)
        assert not always & set(empty), f"empty panels: {empty}"
        return True

    # In one pass, as one dashboard refresh shows them. A pass that lands before a series exists
    # (a region not yet probed, a replica with one sample where rate() needs two) is asked again.
    wait_until(panels_show_data, timeout_s=60, interval_s=2, what=f"the panels {sorted(always)} showing data")


def test_dashboard_json_is_what_the_generator_builds(tmp_path: Path) -> None:
    build = str(DASHBOARD.with_name("build.py"))
    done = subprocess.run(
        [sys.executable, build, "--out", str(tmp_path / "drctl.json")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "drctl.json").read_text() == DASHBOARD.read_text()
    assert subprocess.run([sys.executable, build, "--check"], timeout=60).returncode == 0
