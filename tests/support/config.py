"""The config writers: the reference two-region test fleet on free loopback ports, drill configs,
an in-memory config written out, and small FleetSpecs.

HAProxy runtime sockets are unix sockets, whose paths must stay under ~100 characters, so the
state dir lives in a short directory under /tmp rather than pytest's deep tmp_path.
"""

from __future__ import annotations

import copy
import json
import tempfile
import uuid
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel

from bench.rto_fleet import loopback_services
from drctl.config.schema import FleetConfig, load_config, parse_config
from drctl.models.activity_io import Capacity
from drctl.models.failover import capacity_of
from drctl.models.fleet_spec import FleetSpec, RegionSpec
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]
M = TypeVar("M", bound=BaseModel)


def short_tmp_dir(prefix: str = "drctl-") -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


def _ports(n: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < n:
        p = free_port()
        if p not in ports:
            ports.append(p)
    return ports


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    for k, v in over.items():
        base[k] = _merge(dict(base[k]), v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return base


def port_pair() -> int:
    """A free port whose successor is free too (the dev stack's two workers take both)."""
    for _ in range(50):
        p, q = free_port(), free_port()
        if q == p + 1:
            return p
    raise RuntimeError("no two consecutive free loopback ports")


def fleet_config_data(namespace: str = "default", data_plane: bool = False) -> dict[str, Any]:
    temporal, ui, moto, glob, stats, prom, *region_ports = _ports(12)
    worker_http = port_pair()
    regions = []
    for i, (name, weight) in enumerate([("us-west-1", 60), ("us-east-1", 40)]):
        gw, kube, admin = region_ports[i * 3 : i * 3 + 3]
        regions.append(
            {
                "name": name,
                "weight": weight,
                "replicas": 2,
                "gateway_url": f"http://127.0.0.1:{gw}",
                "gateway_runtime_socket": f"s/haproxy/{name}.sock",
                "devstack_admin_url": f"http://127.0.0.1:{admin}",
                "kube": {"api_url": f"http://127.0.0.1:{kube}"},
            }
        )
    services = loopback_services(temporal, ui, moto, glob, namespace=namespace)
    # The session stack's global tier does only what drctl tells it (no health checks, no retry on
    # another region), so the suite sees drctl's own failover, compensation and drill behaviour, and
    # the Route 53 tests' emulated DNS answers as DNS does. The data plane's own defaults (both on)
    # are tested by tests/devstack/test_fast_path.py and test_haproxy_configs.py.
    # `data_plane=True` keeps the product's defaults, for those tests.
    if not data_plane:
        services["traffic"]["global"].update(fast_path=False, health_checks=False)
    return {
        "name": "test",
        "regions": regions,
        "workload": {"app": "llm", "model": "fleetsim-tiny", "image": "vllm/vllm-openai:v0.6.3"},
        **services,
        "drills": {"allowed_targets": ["us-west-1", "us-east-1"], "fault_injector": "devstack"},
        "data": {
            "buckets": [
                {
                    "name": "models",
                    "source": {"region": "us-west-1", "bucket": "drctl-models-us-west-1"},
                    "replicas": [{"region": "us-east-1", "bucket": "drctl-models-us-east-1"}],
                    "mode": "sync",
                    "interval_s": 3,
                },
                {
                    "name": "state",
                    "source": {"region": "us-west-1", "bucket": "drctl-state-us-west-1"},
                    "replicas": [{"region": "us-east-1", "bucket": "drctl-state-us-east-1"}],
                    "mode": "copy",
                    "interval_s": 2,
                },
            ]
        },
        "devstack": {
            # Replicas answer at once in the session stack; the load time is its own tests' subject
            # (tests/devstack/test_model_loading.py, tests/upgrade/test_slow_load.py set it).
            "model_load_s": 0,
            "state_dir": "s",
            "stats_port": stats,
            "prometheus_port": prom,
            "worker_http_port": worker_http,
        },
        # Test teardown stops workers before it ends workflows; a still-running activity must not
        # hold that up for a production-length grace period. Workers the tests run in-process serve
        # no HTTP endpoint; `drctl dev up`'s workers take worker_http_port and the next port.
        "worker": {"graceful_shutdown_s": 2, "http_port": 0},
    }


def write_fleet_config(
    directory: Path | None = None,
    overrides: dict[str, Any] | None = None,
    namespace: str = "default",
    data_plane: bool = False,
) -> Path:
    """Write fleet.yaml into `directory` (a fresh short /tmp dir by default) and return its path.

    `overrides` is deep-merged into the generated data, e.g. {"health": {"interval_s": 3}}.
    Relative paths in it resolve against the file's directory, like any fleet config.
    """
    directory = directory or short_tmp_dir()
    data = _merge(fleet_config_data(namespace, data_plane), overrides or {})
    path = directory / "fleet.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def tuned(model: M, section: str, **fields: Any) -> M:
    """`model` (a config, or a section of one) with some fields of one of its sections changed,
    e.g. `tuned(cfg, "failover", policy="manual")`."""
    return model.model_copy(update={section: getattr(model, section).model_copy(update=fields)})


def one_region_config(name: str, gateway_url: str, kube: str, sections: str) -> FleetConfig:
    """A fleet of one region, us-west-1, for a provider test: its gateway and Kubernetes API are the
    test's servers, the global and regional tiers (Route 53, Gateway API) are never called. `sections`
    is YAML of the sections the test sets (workload, health); secrets may live under the temp dir."""
    return parse_config(f"""
name: {name}
secret_dirs: [{tempfile.gettempdir()}]
regions:
  - name: us-west-1
    weight: 60
    gateway_url: {gateway_url}
    kube: {kube}
traffic:
  global_endpoint: http://127.0.0.1:1
  global: {{kind: route53, hosted_zone_id: Z1, record_name: api.example.com, targets: {{us-west-1: a}}}}
  regional: {{kind: gateway-api}}
{sections}""")


def write_config(cfg: FleetConfig, directory: Path) -> Path:
    """An in-memory config (fresh queues, short intervals) as a file in `directory`, for a CLI or
    worker subprocess; beside the session config, relative paths in it still resolve."""
    path = directory / f"fleet-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(cfg.model_dump(mode="json", by_alias=True, exclude_none=True)))
    return path


def drill_config(
    directory: Path,
    admin: str | None = None,
    allowed: list[str] | None = None,
    injector: str = "devstack",
    temporal: str | None = None,
    name: str | None = None,
) -> Path:
    """A test fleet config with these drill targets (both regions by default) and injector; with
    `admin`, every region's admin API is that URL, with `temporal`, that server address."""
    allowed = ["us-west-1", "us-east-1"] if allowed is None else allowed
    data = fleet_config_data()
    if admin:
        for r in data["regions"]:
            r["devstack_admin_url"] = admin
    if temporal:
        data["temporal"]["address"] = temporal
    data["drills"] = {"allowed_targets": allowed, "fault_injector": injector}
    path = directory / (name or f"fleet-{'-'.join(allowed) or 'none'}-{injector}.yaml")
    path.write_text(yaml.safe_dump(data))
    return path


def write_drill_config(
    directory: Path, *, allowed: list[str] | None = None, injector: str = "devstack", name: str = "fleet.yaml"
) -> FleetConfig:
    """`drill_config`, loaded."""
    return load_config(drill_config(directory, allowed=allowed, injector=injector, name=name))


def shipped_experiment(name: str = "region-outage") -> dict[str, Any]:
    """A fresh copy of a shipped experiment, to break one thing in."""
    return copy.deepcopy(json.loads((REPO / "experiments" / f"{name}.json").read_text()))


def spec(regions: list[tuple[str, int, int]], **extra: float) -> FleetSpec:
    """A FleetSpec of (name, weight, replicas) regions, max_replicas 8."""
    return FleetSpec(
        fleet="t",
        task_queue="q",
        deployment="llm-stable",
        regions=[
            RegionSpec(name=n, weight=w, replicas=r, max_replicas=8, queue=f"q-{n}") for n, w, r in regions
        ],
        interval_s=10,
        probe_timeout_s=2,
        failure_threshold=3,
        recovery_threshold=3,
        fast_confirm=True,
        fast_confirm_interval_s=1,
        fail_on_degraded=True,
        rto_target_s=30,
        policy="automatic",
        require_approval=False,
        approval_timeout_s=900,
        verify_requests=20,
        verify_timeout_s=15,
        rollout_timeout_s=120,
        stabilization_window_s=30,
        failback_steps=3,
        failback_step_interval_s=10,
        **extra,
    )


def cap(region: str, replicas: int, max_replicas: int = 8) -> Capacity:
    return capacity_of(region, "llm-stable", replicas, replicas, max_replicas, None, None)


def nowhere_config(cfg: FleetConfig, directory: Path) -> FleetConfig:
    """`cfg` with every endpoint but Temporal's pointing nowhere: Kubernetes APIs, gateways, admin
    APIs and the global endpoint at closed loopback ports, HAProxy runtime sockets at paths that do
    not exist, AWS (S3, Route 53) at a closed port. The CLI's copy in the read-path tests."""

    def closed() -> str:
        return f"http://127.0.0.1:{free_port()}"

    missing = str(directory / "no-such.sock")
    regions = [
        r.model_copy(
            update={
                "gateway_url": closed(),
                "devstack_admin_url": closed(),
                "gateway_runtime_socket": missing,
                "kube": r.kube.model_copy(update={"api_url": closed()}),
            }
        )
        for r in cfg.regions
    ]
    g = cfg.traffic.global_tier
    tier = g.model_copy(update={"runtime_socket": missing}) if hasattr(g, "runtime_socket") else g
    traffic = cfg.traffic.model_copy(update={"global_endpoint": closed(), "global_tier": tier})
    return cfg.model_copy(
        update={
            "regions": regions,
            "traffic": traffic,
            "aws": cfg.aws.model_copy(update={"endpoint_url": closed()}),
        }
    )
