"""Start and stop one real region process (`python -m drctl.devstack.region`) for tests.

Usage:
    cfg_path = tests.fleetcfg.write_fleet_config()    # free ports, short socket paths
    with RegionProcess(cfg_path, "us-west-1") as rp:  # waits for ready replicas and the gateway
        rp.admin.get("/replicas")
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType

import httpx

from drctl.config.schema import FleetConfig, load_config
from tests.support.wait import wait_until


class RegionProcess:
    """One region process run as a subprocess; `stop()` sends SIGTERM and waits."""

    def __init__(self, config_path: Path, region: str, start_timeout_s: float = 30.0) -> None:
        self.config_path = config_path
        self.region = region
        self.cfg: FleetConfig = load_config(config_path)
        self.region_cfg = self.cfg.region(region)
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.cfg.state_dir() / "logs" / f"region-{region}.log"
        assert self.region_cfg.devstack_admin_url and self.region_cfg.kube.api_url
        self.admin = httpx.Client(base_url=self.region_cfg.devstack_admin_url, timeout=10.0)
        self.gateway = httpx.Client(base_url=self.region_cfg.gateway_url, timeout=10.0)

    def start(self) -> RegionProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "drctl.devstack.region",
                    "--config",
                    str(self.config_path),
                    "--region",
                    self.region,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        wait_until(
            self._ready, timeout_s=self.start_timeout_s, interval_s=0.2, what=f"region {self.region} ready"
        )
        return self

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"region process exited {self.proc.returncode}:\n{self.log_tail()}")
        try:
            ready = [r for r in self.admin.get("/replicas").json() if r["state"] == "running"]
            return len(ready) >= self.region_cfg.replicas and self.gateway.get("/health").status_code == 200
        except httpx.HTTPError:
            return False

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        self.admin.close()
        self.gateway.close()
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)

    def __enter__(self) -> RegionProcess:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def alive(pid: int) -> bool:
    """Whether a process (a replica the region process runs, say) still exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
