"""(Re)start single dev-stack components: one region's worker, the Temporal dev server, or the global HAProxy.

A crashed worker or server is replaced the way an operator (or Kubernetes) would: the same argv,
the same state. Temporal restarts on its `--db-filename`, so running workflows survive it. Every
process started here is recorded in stack.json, so `drctl dev down` stops it too.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from drctl.config.schema import FleetConfig
from drctl.devstack import haproxy_conf, processes, prometheus, readiness
from drctl.devstack.stack import (
    Component,
    StackError,
    _pid_path,
    _read_record,
    components,
    state_dir,
    worker_env,
)
from drctl.providers.haproxy_runtime import HAProxyError, HAProxyRuntime


def _component(cfg: FleetConfig, config_path: Path, name: str) -> Component:
    by_name = {c.name: c for c in components(cfg, config_path, workers=True)}
    if name not in by_name:
        raise StackError(f"no dev-stack component {name!r}; known: {', '.join(sorted(by_name))}", exit_code=2)
    return by_name[name]


def _spawn(cfg: FleetConfig, comp: Component) -> int:
    s = state_dir(cfg)
    pid = processes.spawn(
        comp.argv,
        s / "logs" / f"{comp.name}.log",
        _pid_path(s, comp.name),
        {**os.environ, **comp.env, **worker_env(cfg, comp)},
    )
    record = _read_record(s)
    record["components"][comp.name] = {"pid": pid, "argv": comp.argv, "ports": comp.ports}
    (s / "stack.json").write_text(json.dumps(record, indent=2))
    return pid


def _wait(cfg: FleetConfig, comp: Component, pid: int, ready: readiness.Check, timeout_s: float) -> None:
    log = state_dir(cfg) / "logs" / f"{comp.name}.log"
    deadline = time.monotonic() + timeout_s
    reason: str | None = "not checked yet"
    while True:
        # Between fork and exec the child still shows our cmdline: only a dead pid has exited.
        if not processes.pid_alive(pid):
            raise StackError(
                f"{comp.name} exited during start-up (log {log})", comp.name, processes.log_tail(log)
            )
        reason = ready()
        if reason is None:
            return
        if time.monotonic() > deadline:
            raise StackError(
                f"{comp.name} not ready after {timeout_s:g}s: {reason} (log {log})",
                comp.name,
                processes.log_tail(log),
            )
        time.sleep(0.1)


def _wait_ports_free(comp: Component, timeout_s: float) -> None:
    """A process just killed still holds its listening sockets for a moment after its pid is gone."""
    deadline = time.monotonic() + timeout_s
    while not all(processes.port_bindable(p) for p in comp.ports.values()):
        if time.monotonic() > deadline:
            holders = "".join(processes.port_holder(p) for p in comp.ports.values())
            raise StackError(
                f"{comp.name}: ports {sorted(comp.ports.values())} still taken{holders or ' (is one running?)'}",
                comp.name,
                exit_code=2,
            )
        time.sleep(0.1)


def start_worker(cfg: FleetConfig, config_path: Path, region: str, timeout_s: float = 60.0) -> int:
    """Start `drctl worker --region R` for `config_path` (a replacement after a crash); return its pid.

    Ready means its own /readyz answers: Temporal's poller list still shows a dead worker's polls
    for a minute, so it cannot tell a replacement from the process it replaces.
    """
    comp = _component(cfg, config_path, f"worker-{region}")
    _wait_ports_free(comp, 10.0)
    pid = _spawn(cfg, comp)
    url = f"http://127.0.0.1:{prometheus.worker_port(cfg, region)}/readyz"
    _wait(cfg, comp, pid, lambda: readiness.http_ok(url), timeout_s)
    return pid


def restart_temporal(cfg: FleetConfig, config_path: Path, timeout_s: float = 60.0) -> int:
    """Stop the Temporal dev server and start it again on the same db file; return the new pid."""
    comp = _component(cfg, config_path, "temporal")
    s = state_dir(cfg)
    old = processes.read_pid(_pid_path(s, comp.name))
    if old is not None and processes.is_ours(old, comp.argv):
        processes.terminate([old])
    _wait_ports_free(comp, timeout_s)
    pid = _spawn(cfg, comp)
    _wait(cfg, comp, pid, lambda: readiness.temporal_ready(comp.argv[0], cfg), timeout_s)
    return pid


def restart_global_gateway(cfg: FleetConfig, config_path: Path, timeout_s: float = 30.0) -> int:
    """Re-render haproxy/global.cfg from `cfg` and restart the global HAProxy on it; return its pid.

    For switching the global tier's options (e.g. traffic.global.fast_path) on a running stack,
    or an operator's restart mid-failover. The runtime weights survive it as they survive a
    production reload (HAProxy's management guide, "server-state-file"): the old process's
    `show servers state` is written to the state file first, and the new one loads it. An old
    process that does not answer leaves the last state file as it is.
    """
    comp = _component(cfg, config_path, "haproxy-global")
    s = state_dir(cfg)
    old = processes.read_pid(_pid_path(s, comp.name))
    alive = old is not None and processes.is_ours(old, comp.argv)
    if alive:
        runtime = HAProxyRuntime(haproxy_conf.global_socket(cfg))
        try:
            state = runtime.command(f"show servers state {haproxy_conf.global_backend(cfg)}")
        except HAProxyError as exc:
            print(
                f"haproxy-global: no server state saved ({exc}); it restarts on the last one", file=sys.stderr
            )
        else:
            haproxy_conf.save_state(state, haproxy_conf.state_file(cfg, "global"))
    (s / "haproxy" / "global.cfg").write_text(haproxy_conf.render_global(cfg))
    if alive and old is not None:
        processes.terminate([old])
    _wait_ports_free(comp, timeout_s)
    pid = _spawn(cfg, comp)
    _wait(
        cfg,
        comp,
        pid,
        lambda: (
            None if all(processes.port_open(p) for p in comp.ports.values()) else "ports not answering yet"
        ),
        timeout_s,
    )
    return pid
