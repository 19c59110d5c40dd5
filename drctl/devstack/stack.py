"""`drctl dev up|status|down`: start, inspect and stop the embedded dev stack.

Ports come only from the fleet config's URLs (docs/devstack.md), so the stack serves exactly what
the product will call. Everything the stack starts is recorded under the state dir, and only
recorded processes that still run the recorded command are ever signalled.

Slightly over the house limit of about 300 lines: the component table, start-up order, readiness
and teardown all read the same stack record, and `restart.py` already holds single restarts.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from pydantic import BaseModel

from drctl.config.schema import FleetConfig
from drctl.devstack import moto_seed, processes, prometheus, readiness, worker_credentials
from drctl.models import search_attributes


class StackError(Exception):
    """The stack could not be brought up. exit_code 2 for a conflict the user must clear first."""

    def __init__(self, message: str, component: str | None = None, log: str = "", exit_code: int = 1) -> None:
        super().__init__(message)
        self.component = component
        self.log = log
        self.exit_code = exit_code


@dataclass(frozen=True)
class Component:
    name: str
    argv: list[str]
    ports: dict[str, int]  # what the port serves, e.g. "global endpoint" -> 8400
    env: dict[str, str] = field(default_factory=dict)


class RegionEndpoints(BaseModel):
    name: str
    kube_api_url: str
    gateway_url: str
    admin_url: str | None
    gateway_runtime_socket: str | None


class StackInfo(BaseModel):
    state_dir: str
    config_path: str
    global_endpoint: str
    temporal_address: str
    temporal_ui_url: str
    moto_url: str
    stats_url: str
    prometheus_url: str
    regions: list[RegionEndpoints]
    pids: dict[str, int]
    started: list[str]  # components this call started; the others were already running


class ComponentStatus(BaseModel):
    name: str
    pid: int | None
    alive: bool
    ports: dict[str, dict[str, int | bool]]  # label -> {"port": n, "open": bool}


def state_dir(cfg: FleetConfig) -> Path:
    return cfg.state_dir().resolve()


def _port(url: str, what: str) -> int:
    parsed = urlparse(url if "://" in url else f"tcp://{url}")
    if parsed.port is None:
        raise StackError(
            f"{what} {url!r} has no port; the dev stack serves only explicit loopback ports", exit_code=2
        )
    return parsed.port


def _tool(name: str, fallback: str | None = None) -> str:
    beside = Path(sys.executable).parent / name
    found = (
        str(beside)
        if beside.exists()
        else shutil.which(name) or (fallback if fallback and Path(fallback).exists() else None)
    )
    if not found:
        hint = (
            f" (Debian: apt-get install {name})"
            if name in ("haproxy", "prometheus")
            else " (pip install -e '.[test]')"
        )
        raise StackError(f"{name} not found next to {sys.executable} or on PATH{hint}", component=name)
    return found


def components(cfg: FleetConfig, config_path: Path, workers: bool = False) -> list[Component]:
    s = state_dir(cfg)
    t = cfg.temporal
    temporal = Component(
        "temporal",
        [
            _tool("temporal"),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(_port(t.address, "temporal.address")),
            "--ui-port",
            str(_port(t.ui_url, "temporal.ui_url")),
            "--db-filename",
            str(s / "temporal.db"),
            "--namespace",
            t.namespace,
            *search_attributes.cli_flags(),
        ],
        {
            "Temporal frontend": _port(t.address, "temporal.address"),
            "Temporal UI": _port(t.ui_url, "temporal.ui_url"),
        },
    )
    if not cfg.aws.endpoint_url:
        raise StackError("aws.endpoint_url must point at the dev stack's moto server", exit_code=2)
    moto_port = _port(cfg.aws.endpoint_url, "aws.endpoint_url")
    # moto behind a SigV4 checker that refuses temporary keys without their token, as AWS does
    # (s3_auth_proxy.py); the workers hold such keys (worker_credentials.py).
    moto = Component(
        "moto",
        [
            sys.executable,
            "-m",
            "drctl.devstack.s3_auth_proxy",
            "--host",
            "127.0.0.1",
            "--port",
            str(moto_port),
            "--issued-file",
            str(s / "aws-issued-keys.json"),
        ],
        {"moto (AWS)": moto_port},
    )
    stats_port = cfg.devstack.stats_port if cfg.devstack else 8404
    haproxy = Component(
        "haproxy-global",
        [_tool("haproxy", "/usr/sbin/haproxy"), "-db", "-f", str(s / "haproxy" / "global.cfg")],
        {
            "global endpoint": _port(cfg.traffic.global_endpoint, "traffic.global_endpoint"),
            "HAProxy stats": stats_port,
        },
    )
    # The region process starts its gateway as plain `haproxy`; /usr/sbin is often not on a user's PATH.
    path = os.environ.get("PATH", "")
    env = {
        "PYTHONUNBUFFERED": "1",
        "PATH": f"{path}:{Path(haproxy.argv[0]).parent}" if path else str(Path(haproxy.argv[0]).parent),
    }
    regions = []
    for r in cfg.regions:
        if not r.kube.api_url:
            raise StackError(f"region {r.name}: the dev stack needs kube.api_url", exit_code=2)
        ports = {
            f"{r.name} gateway": _port(r.gateway_url, f"regions[{r.name}].gateway_url"),
            f"{r.name} Kubernetes API": _port(r.kube.api_url, f"regions[{r.name}].kube.api_url"),
        }
        if r.devstack_admin_url:
            ports[f"{r.name} admin API"] = _port(
                r.devstack_admin_url, f"regions[{r.name}].devstack_admin_url"
            )
        argv = [
            sys.executable,
            "-m",
            "drctl.devstack.region",
            "--config",
            str(config_path.resolve()),
            "--region",
            r.name,
        ]
        regions.append(Component(f"region-{r.name}", argv, ports, env))
    # One worker per region, as in production: each serves the main queue and its own region's
    # queue, so a failover to a region needs only that region's worker (static stability).
    # Each worker gets its own HTTP port (/metrics, /healthz, /readyz) for Prometheus to scrape.
    drctl_workers = (
        [
            Component(
                f"worker-{r.name}",
                [
                    sys.executable,
                    "-m",
                    "drctl",
                    "worker",
                    "--config",
                    str(config_path.resolve()),
                    "--region",
                    r.name,
                    "--http-port",
                    str(prometheus.worker_port(cfg, r.name)),
                    "--http-host",
                    "127.0.0.1",
                ],
                {f"{r.name} worker metrics": prometheus.worker_port(cfg, r.name)},
                env,
            )
            for r in cfg.regions
        ]
        if workers
        else []
    )
    prom = Component(
        "prometheus",
        prometheus.argv(_tool("prometheus", "/usr/bin/prometheus"), cfg, s),
        {"Prometheus": prometheus.port(cfg)},
    )
    return [temporal, moto, *regions, haproxy, prom, *drctl_workers]


def worker_env(cfg: FleetConfig, comp: Component) -> dict[str, str]:
    """A worker's temporary AWS keys from moto's STS (none for other components); fresh per start."""
    return worker_credentials.worker_env(cfg, comp.name) if comp.name.startswith("worker-") else {}


def _pid_path(s: Path, name: str) -> Path:
    return s / "pids" / f"{name}.pid"


def _running(s: Path, comp: Component) -> int | None:
    """The pid of our live process for comp, or None."""
    pid = processes.read_pid(_pid_path(s, comp.name))
    return pid if pid is not None and processes.is_ours(pid, comp.argv) else None


def _read_record(s: Path) -> dict:
    try:
        return json.loads((s / "stack.json").read_text())
    except (OSError, ValueError):
        return {"components": {}}


def up(cfg: FleetConfig, config_path: Path, timeout_s: float = 180.0, workers: bool = False) -> StackInfo:
    """Start whatever is not running, wait until the whole stack serves, and describe it.

    With `workers`, one `drctl worker --region R` per region joins the stack (the demo's setup);
    tests run their own workers on private task queues instead.
    """
    s = state_dir(cfg)
    comps = components(cfg, config_path, workers)
    by_name = {c.name: c for c in comps}
    keep: dict[str, int] = {}
    restart: dict[str, int] = {}
    for comp in comps:
        pid = _running(s, comp)
        if pid is None:
            continue
        if all(processes.port_open(p) for p in comp.ports.values()):
            keep[comp.name] = pid
        else:
            restart[comp.name] = pid  # alive but not serving its ports: wedged, start it afresh
    for comp in comps:
        if comp.name in keep or comp.name in restart:
            continue
        for label, port in comp.ports.items():
            if not processes.port_bindable(port):
                raise StackError(
                    f"port {port} ({label}) is already in use by another process"
                    f"{processes.port_holder(port)}; "
                    f"stop it or change the port in {config_path}",
                    component=comp.name,
                    exit_code=2,
                )
    processes.terminate(restart.values())
    for sub in ("pids", "logs", "haproxy"):
        (s / sub).mkdir(parents=True, exist_ok=True)
    record = _read_record(s)
    for name, pid in keep.items():
        record["components"].setdefault(
            name, {"pid": pid, "argv": by_name[name].argv, "ports": by_name[name].ports}
        )
    started: list[str] = []
    pids: dict[str, int] = {}
    # Workers connect to Temporal as they start, so they go in a second wave, once the rest serves.
    base = [c for c in comps if not c.name.startswith("worker-")]
    for wave in (base, [c for c in comps if c.name.startswith("worker-")]):
        if not wave:
            continue
        for comp in wave:
            if comp.name in keep:
                continue
            if comp.name == "haproxy-global":
                from drctl.devstack.haproxy_conf import fresh_state_file, render_global, state_file

                (s / "haproxy" / "global.cfg").write_text(render_global(cfg))
                # A stack starts from the config's weights; a restart keeps them (restart.py).
                fresh_state_file(state_file(cfg, "global"))
            if comp.name == "prometheus":
                served = {r.name: prometheus.worker_port(cfg, r.name) for r in cfg.regions if workers}
                prometheus.write_config(cfg, s, served)
            env = {**os.environ, **comp.env, **worker_env(cfg, comp)}
            pid = processes.spawn(comp.argv, s / "logs" / f"{comp.name}.log", _pid_path(s, comp.name), env)
            record["components"][comp.name] = {"pid": pid, "argv": comp.argv, "ports": comp.ports}
            started.append(comp.name)
        pids.update({c.name: keep.get(c.name) or record["components"][c.name]["pid"] for c in wave})
        record.update(state_dir=str(s), config_path=str(config_path.resolve()))
        (s / "stack.json").write_text(json.dumps(record, indent=2))
        _wait_ready(cfg, s, wave, pids, timeout_s, temporal_bin=comps[0].argv[0])
    return _info(cfg, config_path, s, pids, started)


def _wait_ready(
    cfg: FleetConfig,
    s: Path,
    comps: list[Component],
    pids: dict[str, int],
    timeout_s: float,
    temporal_bin: str,
) -> None:
    checks: dict[str, readiness.Check] = {
        "temporal": lambda: readiness.temporal_ready(temporal_bin, cfg),
        "moto": lambda: readiness.http_answers(cfg.aws.endpoint_url or ""),
        "haproxy-global": lambda: readiness.answers_completion(cfg.traffic.global_endpoint, cfg),
        "prometheus": lambda: readiness.http_ok(f"{prometheus.url(cfg)}/-/ready"),
    }
    for r in cfg.regions:
        checks[f"region-{r.name}"] = lambda r=r: readiness.region_ready(r, cfg)  # type: ignore[misc]
        if f"worker-{r.name}" in pids:
            checks[f"worker-{r.name}"] = lambda r=r: readiness.worker_polling(  # type: ignore[misc]
                temporal_bin, cfg, r.queue
            )
    by_name = {c.name: c for c in comps}
    pending = {name: check for name, check in checks.items() if name in by_name}
    reasons: dict[str, str] = {}
    deadline = time.monotonic() + timeout_s
    while pending:
        for name in list(pending):
            if not processes.is_ours(pids[name], by_name[name].argv):
                log = s / "logs" / f"{name}.log"
                raise StackError(f"{name} exited during start-up (log {log})", name, processes.log_tail(log))
            reason = pending[name]()
            if reason is None and name == "moto":
                moto_seed.seed(cfg)  # moto is in-memory: seed after every start, idempotently
            if reason is None:
                del pending[name]
            else:
                reasons[name] = reason
        if not pending:
            break
        if time.monotonic() > deadline:
            name = next(iter(pending))
            log = s / "logs" / f"{name}.log"
            raise StackError(
                f"{name} not ready after {timeout_s:g}s: {reasons.get(name)} (log {log})",
                name,
                processes.log_tail(log),
            )
        time.sleep(0.25)


def _info(
    cfg: FleetConfig, config_path: Path, s: Path, pids: dict[str, int], started: list[str]
) -> StackInfo:
    stats_port = cfg.devstack.stats_port if cfg.devstack else 8404
    return StackInfo(
        state_dir=str(s),
        config_path=str(config_path.resolve()),
        global_endpoint=cfg.traffic.global_endpoint,
        temporal_address=cfg.temporal.address,
        temporal_ui_url=cfg.temporal.ui_url,
        moto_url=cfg.aws.endpoint_url or "",
        stats_url=f"http://127.0.0.1:{stats_port}/",
        prometheus_url=prometheus.url(cfg),
        regions=[
            RegionEndpoints(
                name=r.name,
                kube_api_url=r.kube.api_url or "",
                gateway_url=r.gateway_url,
                admin_url=r.devstack_admin_url,
                gateway_runtime_socket=r.gateway_runtime_socket,
            )
            for r in cfg.regions
        ],
        pids=pids,
        started=started,
    )


def status(cfg: FleetConfig, config_path: Path | None = None) -> list[ComponentStatus]:
    s = state_dir(cfg)
    path = config_path or Path(cfg.source_path or "fleet.yaml")
    out = []
    record = _read_record(s)["components"]
    for comp in components(cfg, path, workers=any(n.startswith("worker-") for n in record)):
        pid = processes.read_pid(_pid_path(s, comp.name))
        recorded = record.get(comp.name, {}).get("argv") or comp.argv
        alive = pid is not None and processes.is_ours(pid, recorded)
        ports = {label: {"port": p, "open": processes.port_open(p)} for label, p in comp.ports.items()}
        out.append(ComponentStatus(name=comp.name, pid=pid, alive=alive, ports=ports))
    return out


def _replica_pids(s: Path) -> list[int]:
    """Replica and gateway pids the node agents recorded (replicas-<region>.json)."""
    pids: list[tuple[int, str]] = []
    for f in s.glob("replicas-*.json"):
        try:
            data = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data.get("gateway_pid"), int):
            pids.append((data["gateway_pid"], "haproxy"))
        pids += [(e["pid"], "fleetsim") for e in data.get("replicas", []) if isinstance(e.get("pid"), int)]
    # A recycled pid must not be signalled: only a process running what was recorded counts.
    return [p for p, what in pids if processes.pid_alive(p) and any(what in a for a in processes.cmdline(p))]


def down(cfg: FleetConfig) -> list[str]:
    """Stop every recorded process of the stack, then its replicas and stragglers; clean pid files and sockets."""
    s = state_dir(cfg)
    record = _read_record(s)
    ours: dict[str, int] = {}
    for name, entry in record.get("components", {}).items():
        pid = processes.read_pid(_pid_path(s, name))
        if pid is not None and processes.is_ours(pid, entry.get("argv", [])):
            ours[name] = pid
    # Replicas are read before the regions stop, while their records are still current.
    replicas = _replica_pids(s)
    processes.terminate(ours.values())
    processes.terminate(p for p in replicas if processes.pid_alive(p))
    # Anything still naming our state dir (a region gateway HAProxy orphaned by a crashed region).
    processes.terminate(processes.pids_mentioning(f"{s}/"), timeout_s=3.0)
    for f in [
        *s.glob("pids/*.pid"),
        *s.glob("haproxy/*.sock"),
        *s.glob("replicas-*.json"),
        s / "stack.json",
        s / "aws-issued-keys.json",  # the workers' temporary keys die with them
        *prometheus.targets_dir(s).glob("fleetsim-*.json"),
    ]:
        f.unlink(missing_ok=True)
    sockets = [r.gateway_runtime_socket for r in cfg.regions]
    if cfg.traffic.global_tier.kind == "haproxy":
        sockets.append(cfg.traffic.global_tier.runtime_socket)
    for sock in sockets:
        if sock and Path(sock).is_socket():
            Path(sock).unlink()
    return sorted(ours)
