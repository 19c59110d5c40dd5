"""Every HAProxy config drctl renders or ships loads without a warning, on every HAProxy here.

`haproxy -c -f` on the dev stack's rendered configs (global tier with and without the fast path,
each region gateway) and on compose's shipped ones, with Debian's HAProxy and the 3.2 build.
HAProxy 3.2 warns about what 3.3 will refuse (a backend named like its frontend), so a warning is
a failure here, not noise.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from drctl.config.schema import load_config
from drctl.devstack.haproxy_conf import (
    fresh_state_file,
    global_socket,
    haproxy_dir,
    partition_acl,
    region_socket,
    render_global,
    render_region,
    save_state,
    state_file,
)
from drctl.providers.haproxy_runtime import HAProxyRuntime
from tests.support.config import short_tmp_dir, write_fleet_config
from tests.support.haproxy_binaries import REPO, binaries, debian
from tests.support.ports import free_port
from tests.support.wait import wait_until


def _rendered() -> dict[str, str]:
    out = {}
    for fast_path in (False, True):
        cfg = load_config(
            write_fleet_config(overrides={"traffic": {"global": {"fast_path": fast_path}}}, data_plane=True)
        )
        haproxy_dir(cfg).mkdir(parents=True, exist_ok=True)
        fresh_state_file(state_file(cfg, "global"))  # what `drctl dev up` writes before start
        out[f"devstack global{' fast_path' if fast_path else ''}"] = render_global(cfg)
        for r in cfg.regions:
            partition_acl(cfg, r.name).write_text("")  # what the region process writes before start
            fresh_state_file(state_file(cfg, r.name))
            out[f"devstack {r.name}"] = render_region(cfg, r.name)
    return out


def _shipped(run_dir: Path) -> dict[str, str]:
    """Compose's configs, with its service names mapped to loopback and its socket dir to run_dir."""
    out = {}
    for name in ("haproxy-global.cfg", "haproxy-region.cfg"):
        text = (REPO / "deploy" / "compose" / name).read_text()
        text = re.sub(r"(gateway-us-\w+-1|vllm-\$\{REGION\}[\w-]*):", "127.0.0.1:", text)
        out[f"compose {name}"] = text.replace("/run/haproxy/", f"{run_dir}/")
    for name in ("global", "us-west-1"):  # what compose's haproxy-run-dir writes before the first start
        fresh_state_file(run_dir / f"{name}.state")
    return out


@pytest.mark.parametrize("haproxy", binaries())
def test_every_config_loads_without_warnings(haproxy: str, tmp_path: Path) -> None:
    configs = {**_rendered(), **_shipped(tmp_path)}
    assert len(configs) == 6  # two global tiers, two region gateways, two compose files
    problems = []
    for i, (what, text) in enumerate(configs.items()):
        path = tmp_path / f"{i}.cfg"
        path.write_text(text)
        result = subprocess.run(
            [haproxy, "-c", "-f", str(path)],
            capture_output=True,
            text=True,
            timeout=30,
            env={"REGION": "us-west-1", "PATH": "/usr/sbin:/usr/bin"},
        )
        said = result.stdout + result.stderr
        if result.returncode != 0 or re.search(r"\[(WARNING|ALERT)\]", said):
            problems.append(f"--- {what} (exit {result.returncode}):\n{said}")
    assert not problems, "\n".join(problems)


def _start(haproxy: str, conf: Path, sock: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [haproxy, "-db", "-f", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={"REGION": "us-west-1", "PATH": "/usr/sbin:/usr/bin"},
    )
    wait_until(lambda: sock.exists() or proc.poll() is not None, 10, what=f"{sock} up")
    assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
    return proc


def _stop(proc: subprocess.Popen[bytes], sock: Path) -> None:
    proc.terminate()
    proc.wait(5)
    sock.unlink(missing_ok=True)


@pytest.mark.parametrize(
    "which", ["devstack global", "devstack us-west-1", "compose global", "compose region"]
)
def test_runtime_weights_survive_a_restart_through_the_server_state_file(which: str) -> None:
    """HAProxy's reload procedure on every config drctl renders or ships: set weights at runtime,
    write `show servers state` to the config's server-state-file, restart: the weights are back.
    (Before, no config named a state file and a restarted HAProxy came back at its configured weights.)"""
    run_dir = short_tmp_dir("drctl-state-")
    try:
        cfg = load_config(write_fleet_config(run_dir, data_plane=True))
        haproxy_dir(cfg).mkdir(parents=True, exist_ok=True)
        if which.startswith("devstack"):
            name = which.split()[1]
            text = render_global(cfg) if name == "global" else render_region(cfg, name)
            if name != "global":
                partition_acl(cfg, name).write_text("")
            sock = Path(global_socket(cfg) if name == "global" else region_socket(cfg, cfg.region(name)))
            state = state_file(cfg, name)
        else:
            name = "global" if which == "compose global" else "us-west-1"
            text = (REPO / "deploy" / "compose" / f"haproxy-{which.split()[1]}.cfg").read_text()
            text = re.sub(r"(gateway-us-\w+-1|vllm-\$\{REGION\}[\w-]*):", "127.0.0.1:", text)
            text = re.sub(r"bind :\d+", lambda _m: f"bind 127.0.0.1:{free_port()}", text)
            text = text.replace("/run/haproxy/", f"{run_dir}/")
            sock, state = run_dir / f"{name}.sock", run_dir / f"{name}.state"
        backend = "global" if name == "global" else "region"
        wanted = {"us-west-1": 0, "us-east-1": 100} if name == "global" else {"stable": 30, "canary": 70}
        fresh_state_file(state)
        conf = run_dir / "haproxy.cfg"
        conf.write_text(text)
        proc = _start(debian(), conf, sock)
        try:
            runtime = HAProxyRuntime(str(sock))
            runtime.set_weights(backend, wanted)
            save_state(runtime.command(f"show servers state {backend}"), state)
        finally:
            _stop(proc, sock)
        proc = _start(debian(), conf, sock)
        try:
            weights = HAProxyRuntime(str(sock)).get_weights(backend)
            assert {k: weights[k] for k in wanted} == wanted
        finally:
            _stop(proc, sock)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
