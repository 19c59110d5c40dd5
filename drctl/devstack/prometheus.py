"""The dev stack's Prometheus (the Debian `prometheus` binary): config and scrape-target files.

Targets are file_sd JSON files under <state>/prometheus/targets/, which Prometheus watches:
- workers.json, written by `drctl dev up` for the workers it starts;
- fleetsim-<region>.json, rewritten by each region's node agent as replicas come and go,
  so a replica is scraped from the moment it starts, like a pod under Kubernetes SD.
The alert rules of deploy/prometheus/ are loaded when the source tree is present, so a
developer sees drctl's alerts fire against the dev stack.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from drctl.config.schema import FleetConfig

RULES = Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "drctl-rules.yaml"


def directory(state_dir: Path) -> Path:
    return state_dir / "prometheus"


def targets_dir(state_dir: Path) -> Path:
    return directory(state_dir) / "targets"


def port(cfg: FleetConfig) -> int:
    return cfg.devstack.prometheus_port if cfg.devstack else 9090


def url(cfg: FleetConfig) -> str:
    return f"http://127.0.0.1:{port(cfg)}"


def worker_port(cfg: FleetConfig, region: str) -> int:
    """Each dev-stack worker's HTTP port: consecutive from devstack.worker_http_port, in region order."""
    first = cfg.devstack.worker_http_port if cfg.devstack else 9464
    return first + cfg.region_names.index(region)


def render_config(cfg: FleetConfig, state_dir: Path) -> str:
    interval = f"{cfg.devstack.scrape_interval_s if cfg.devstack else 2.0:g}s"
    targets = targets_dir(state_dir)
    conf: dict[str, Any] = {
        "global": {
            "scrape_interval": interval,
            "evaluation_interval": interval,
            "scrape_timeout": interval,
            "external_labels": {"fleet": cfg.name},
        },
        "scrape_configs": [
            {"job_name": "drctl-worker", "file_sd_configs": [{"files": [str(targets / "workers.json")]}]},
            # vLLM's metrics carry no fleet label: add it, as a production scrape config (or a
            # PodMonitor's relabelings) must, so the dashboard's fleet filter covers them too.
            {
                "job_name": "fleetsim",
                "file_sd_configs": [{"files": [str(targets / "fleetsim-*.json")]}],
                "relabel_configs": [{"target_label": "fleet", "replacement": cfg.name}],
            },
        ],
    }
    if RULES.exists():
        conf["rule_files"] = [str(RULES)]
    return yaml.safe_dump(conf, sort_keys=False)


def argv(binary: str, cfg: FleetConfig, state_dir: Path) -> list[str]:
    d = directory(state_dir)
    return [
        binary,
        f"--config.file={d / 'prometheus.yml'}",
        f"--storage.tsdb.path={d / 'data'}",
        f"--web.listen-address=127.0.0.1:{port(cfg)}",
        "--storage.tsdb.retention.time=2d",
        "--log.level=warn",
    ]


def write_config(cfg: FleetConfig, state_dir: Path, workers: dict[str, int]) -> None:
    """The config, plus workers.json naming the given region -> HTTP port (empty without workers)."""
    targets_dir(state_dir).mkdir(parents=True, exist_ok=True)
    (directory(state_dir) / "prometheus.yml").write_text(render_config(cfg, state_dir))
    # Not `region`: drctl's metrics carry their own region label, which a target label would clobber.
    groups = [{"targets": [f"127.0.0.1:{p}"], "labels": {"worker_region": r}} for r, p in workers.items()]
    write_targets(targets_dir(state_dir) / "workers.json", groups)


def write_targets(path: Path, groups: list[dict[str, Any]]) -> None:
    """Replace a file_sd file atomically, and only when it changes (Prometheus re-reads on change)."""
    text = json.dumps(groups, indent=1)
    if path.exists() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def replica_targets(region: str, replicas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """file_sd groups for a node agent's replicas (Replica.describe() dicts), one per replica."""
    return [
        {
            "targets": [f"127.0.0.1:{r['port']}"],
            "labels": {"region": region, "track": r["track"], "pod": r["pod"]},
        }
        for r in replicas
        if r.get("port")
    ]
