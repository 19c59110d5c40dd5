"""Generate the drctl Grafana dashboard (deploy/grafana/drctl.json) from this one description.

    python deploy/grafana/build.py                 # rewrite drctl.json
    python deploy/grafana/build.py --out FILE      # write it elsewhere
    python deploy/grafana/build.py --check         # exit 1 if drctl.json differs from what this builds

Plain JSON (dashboard schema 39) with no SDK dependency. Every query aggregates across workers,
because each drctl worker exports the same fleet-wide figures. A test runs every `expr` below
against the dev stack's Prometheus.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("drctl.json")
DS = {"type": "prometheus", "uid": "${datasource}"}
F = 'fleet="$fleet"'

# Region state as one number per region, worst first when workers disagree mid-transition.
STATE_CODES = {"HEALTHY": 0, "RECOVERING": 1, "SUSPECT": 2, "UNHEALTHY": 3}
STATE_COLORS = {"HEALTHY": "green", "RECOVERING": "blue", "SUSPECT": "orange", "UNHEALTHY": "red"}
STATE_EXPR = "max by (region) (" + " or ".join(
    f'(drctl_region_state{{{F},state="{s}"}} == 1) * 0 + {c}' for s, c in STATE_CODES.items()) + ")"


FAILOVER_ANNOTATION = f"max by (result) (changes(drctl_last_failover_timestamp_seconds{{{F}}}[1m])) > 0"


def target(expr: str, legend: str = "", ref: str = "A", instant: bool = False) -> dict[str, Any]:
    t: dict[str, Any] = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref}
    if instant:
        t["instant"] = True
        t["range"] = False
    return t


def panel(title: str, kind: str, targets: list[dict[str, Any]], x: int, y: int, w: int = 12, h: int = 8,
          unit: str = "short", description: str = "", **extra: Any) -> dict[str, Any]:
    p: dict[str, Any] = {
        "type": kind, "title": title, "description": description, "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h}, "targets": targets,
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []}, "options": {},
    }
    for k, v in extra.items():
        if k == "defaults":
            p["fieldConfig"]["defaults"].update(v)
        else:
            p[k] = v
    return p


def panels() -> list[dict[str, Any]]:
    state_mappings = [{"type": "value", "options": {
        str(c): {"text": s, "color": STATE_COLORS[s], "index": c} for s, c in STATE_CODES.items()}}]
    out = [
        panel("Region state", "state-timeline", [target(STATE_EXPR, "{{region}}")], 0, 0, w=24, h=6,
              description="The FleetMonitor's state machine per region (HEALTHY → SUSPECT → UNHEALTHY → RECOVERING).",
              defaults={"mappings": state_mappings, "color": {"mode": "thresholds"}},
              options={"showValue": "auto", "mergeValues": True}),
        panel("Global weights", "timeseries",
              [target(f"max by (region) (drctl_region_weight{{{F}}})", "{{region}}")], 0, 6,
              description="Region weights in the global tier, as drctl last read or set them.",
              defaults={"custom": {"stacking": {"mode": "normal"}, "fillOpacity": 40, "lineInterpolation": "stepAfter"}}),
        panel("TTFT per region", "timeseries", [
            target(f"max by (region) (drctl_region_ttft_p50_seconds{{{F}}})", "{{region}} probe p50"),
            target("histogram_quantile(0.99, sum by (region, le) "
                   f"(rate(vllm:time_to_first_token_seconds_bucket{{{F}}}[$__rate_interval])))", "{{region}} served p99", "B"),
        ], 12, 6, unit="s", description="drctl's probe (median over replicas) and vLLM's own TTFT histogram."),
        panel("Replicas failing", "timeseries",
              [target(f"max by (region) (drctl_region_failing_ratio{{{F}}})", "{{region}}")], 0, 14,
              unit="percentunit", defaults={"min": 0, "max": 1}),
        panel("Probe duration p90", "timeseries", [target(
            f"histogram_quantile(0.9, sum by (region, le) (rate(drctl_probe_duration_seconds_bucket{{{F}}}[$__rate_interval])))",
            "{{region}}")], 12, 14, unit="s"),
        panel("Failovers and failbacks", "bargauge", [
            target(f"sum by (result) (increase(drctl_failovers_total{{{F}}}[$__range]))", "failover {{result}}",
                   instant=True),
            target(f"sum by (result) (increase(drctl_failbacks_total{{{F}}}[$__range]))", "failback {{result}}", "B",
                   instant=True),
        ], 0, 22, w=8, description="Finished operations in the selected time range, by result.",
              options={"orientation": "horizontal", "displayMode": "basic"}),
        panel("Measured RTO vs target", "timeseries", [
            target(f"max(drctl_failover_last_rto_seconds{{{F}}})", "last failover RTO"),
            target(f"max(drctl_rto_target_seconds{{{F}}})", "target", "B"),
            target(f"histogram_quantile(0.9, sum by (le) (increase(drctl_failover_rto_seconds_bucket{{{F}}}[$__range])))",
                   "p90 over range", "C"),
        ], 8, 22, w=16, unit="s", description="Fault to verified traffic on the target, measured by the Failover workflow."),
        panel("Drill history", "bargauge", [
            target(f"sum by (verdict) (increase(drctl_drills_total{{{F}}}[$__range]))", "{{verdict}}", instant=True),
        ], 0, 30, w=8, options={"orientation": "horizontal", "displayMode": "basic"}),
        panel("Drill RTO and last passing drill", "stat", [
            target(f"histogram_quantile(0.5, sum by (le) (increase(drctl_drill_rto_seconds_bucket{{{F}}}[$__range])))",
                   "drill RTO p50", instant=True),
            target(f"time() - max(drctl_last_passing_drill_timestamp_seconds{{{F}}})", "since last PASS", "B",
                   instant=True),
        ], 8, 30, w=8, unit="s"),
        panel("Backup age", "stat", [target(
            f"time() - max by (region) (drctl_last_successful_backup_timestamp_seconds{{{F}}})", "{{region}}",
            instant=True)], 16, 30, w=8, unit="s"),
        panel("Replication lag vs RPO target", "timeseries", [
            target(f"max by (bucket, replica_region) (drctl_replication_lag_seconds{{{F}}})",
                   "{{bucket}} → {{replica_region}}"),
            target(f"max(drctl_rpo_target_seconds{{{F}}})", "RPO target", "B"),
        ], 0, 38, w=24, unit="s",
              description="Age of the oldest source object each replica still lacks; above the target, a failover "
                          "to that region loses more than the RPO allows."),
        panel("Operations in progress", "timeseries", [
            target(f"max by (operation, phase) (drctl_operation_in_progress{{{F}}})", "{{operation}} {{phase}}"),
            target(f"max(drctl_monitor_running{{{F}}})", "monitor running", "B"),
        ], 0, 46, w=24, description="Running mutating operations by kind and phase, and whether the monitor runs.",
              defaults={"custom": {"lineInterpolation": "stepAfter"}}),
    ]
    for i, p in enumerate(out, 1):
        p["id"] = i
    return out


def dashboard() -> dict[str, Any]:
    return {
        "uid": "drctl", "title": "drctl: multi-region inference fleet", "tags": ["drctl", "dr"],
        "schemaVersion": 39, "version": 1, "editable": True, "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"}, "timezone": "utc",
        "templating": {"list": [
            {"type": "datasource", "name": "datasource", "label": "Prometheus", "query": "prometheus"},
            {"type": "query", "name": "fleet", "label": "fleet", "datasource": DS, "refresh": 2,
             "query": {"query": "label_values(drctl_monitor_running, fleet)", "refId": "fleet"},
             "definition": "label_values(drctl_monitor_running, fleet)"},
        ]},
        "annotations": {"list": [
            {"builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True,
             "hide": True, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard"},
            # A failover finishing moves its result's timestamp: one marker per finished failover.
            {"datasource": DS, "enable": True, "iconColor": "red", "name": "Failovers", "step": "30s",
             "expr": FAILOVER_ANNOTATION, "titleFormat": "failover {{result}}", "textFormat": "fleet $fleet",
             "useValueForTime": False},
        ]},
        "panels": panels(),
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="deploy/grafana/build.py", description="Generate the drctl Grafana dashboard.")
    parser.add_argument("--out", type=Path, default=OUT, help=f"Where to write it (default {OUT.name} beside this script).")
    parser.add_argument("--check", action="store_true", help="Only check that drctl.json is up to date.")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run python deploy/grafana/build.py", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
