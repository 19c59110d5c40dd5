"""The dev stack on HAProxy 3.2: it comes up, the node agent registers every replica, and a
failover and a failback succeed. Skipped where ../shared/tools/haproxy-3.2 is absent.

One stack of its own (3.2 first on PATH, its own ports and state dir), driven by the real CLI.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from drctl.config.schema import load_config
from drctl.devstack import stack
from drctl.devstack.haproxy_conf import global_backend, global_socket, region_socket, track_backend
from drctl.providers.haproxy_runtime import HAProxyError, HAProxyRuntime
from tests.support.cli import drctl
from tests.support.config import write_fleet_config
from tests.support.haproxy_binaries import HAPROXY_32, NO_32
from tests.support.wait import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.ownstack,
    pytest.mark.skipif(not HAPROXY_32.exists(), reason=NO_32),
]


def _registered(sock: str, backend: str) -> int:
    try:
        return sum(s.operational for s in HAProxyRuntime(sock).servers(backend))
    except HAProxyError:
        return -1


def test_dev_stack_fails_over_and_back_on_haproxy_32() -> None:
    # A short failback (its weight steps are what is under test, not their pacing).
    quick = {"failback": {"steps": 2, "step_interval_s": 1, "stabilization_window_s": 0}}
    path = write_fleet_config(overrides=quick, namespace="drctl-h32")
    cfg = load_config(path)
    env = {"PATH": f"{HAPROXY_32.parent}:{os.environ.get('PATH', '/usr/bin')}"}

    def weights() -> dict[str, int]:
        return HAProxyRuntime(global_socket(cfg)).get_weights(global_backend(cfg))

    try:
        up = drctl("dev", "up", "-c", str(path), env=env)
        assert up.returncode == 0, up.stdout + up.stderr
        for sock in [global_socket(cfg), *(region_socket(cfg, r) for r in cfg.regions)]:
            assert "Version: 3.2.0" in HAProxyRuntime(sock).command("show info"), sock
        for r in cfg.regions:
            sock = region_socket(cfg, r)
            wait_until(
                lambda: _registered(sock, track_backend("stable")) == r.replicas,  # noqa: B023
                timeout_s=60,
                what=f"{r.name}'s {r.replicas} replicas registered and up in its 3.2 gateway",
            )
        assert weights() == cfg.weights

        over = drctl("failover", "--to", "us-east-1", "--yes", "-o", "json", "-c", str(path), env=env)
        assert over.returncode == 0, over.stdout + over.stderr
        assert json.loads(over.stdout)["result"]["status"] == "succeeded", over.stdout
        assert weights() == {"us-west-1": 0, "us-east-1": 100}

        back = drctl("failback", "--yes", "-o", "json", "-c", str(path), env=env)
        assert back.returncode == 0, back.stdout + back.stderr
        assert json.loads(back.stdout)["result"]["status"] == "succeeded", back.stdout
        assert weights() == cfg.weights
    finally:
        stack.down(cfg)
        shutil.rmtree(path.parent, ignore_errors=True)
