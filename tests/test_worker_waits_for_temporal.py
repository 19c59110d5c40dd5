"""A worker started before Temporal waits for it instead of exiting: not ready on /readyz, its
disconnected time growing on /metrics, then connected and ready once a dev server comes up at the
configured address. A configuration error still ends it at once with exit 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import httpx
import pytest
import yaml

from drctl.worker.link import MAX_WAIT_S, wait_s
from tests.support.config import fleet_config_data, write_fleet_config
from tests.support.ports import free_port
from tests.support.temporal import dev_server_command
from tests.support.wait import wait_until

ROOT = Path(__file__).resolve().parents[1]
GAUGE = re.compile(r"^drctl_worker_temporal_disconnected_seconds ([0-9.e+]+)$", re.M)


class _Worker:
    def __init__(self, config: Path, http_port: int) -> None:
        self.base = f"http://127.0.0.1:{http_port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "drctl", "worker", "-c", str(config), "--http-port", str(http_port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def get(self, path: str) -> httpx.Response | None:
        assert self.proc.poll() is None, "\n".join(self.lines[-20:])
        try:
            return httpx.get(self.base + path, timeout=5)
        except httpx.TransportError:
            return None

    def disconnected_s(self) -> float | None:
        r = self.get("/metrics")
        found = GAUGE.search(r.text) if r is not None else None
        return float(found.group(1)) if found else None

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self._reader.join(5)


def test_a_worker_waits_for_temporal_then_becomes_ready() -> None:
    temporal_port, ui_port, http_port = free_port(), free_port(), free_port()
    queue = f"wait-{uuid.uuid4().hex[:8]}"
    config = write_fleet_config(
        overrides={"temporal": {"address": f"127.0.0.1:{temporal_port}", "task_queue": queue}}
    )
    worker = _Worker(config, http_port)
    server: subprocess.Popen[bytes] | None = None
    try:

        def not_ready() -> httpx.Response | None:
            r = worker.get("/readyz")
            return r if r is not None and r.status_code == 503 else None

        r = wait_until(not_ready, timeout_s=60, interval_s=0.2, what="/readyz answering 503")
        assert f"127.0.0.1:{temporal_port} unreachable" in r.text, r.text
        assert worker.get("/healthz").status_code == 200  # type: ignore[union-attr]  # alive, so no restart
        first = wait_until(worker.disconnected_s, timeout_s=30, what="the disconnected gauge")
        wait_until(
            lambda: (worker.disconnected_s() or 0) > first,
            timeout_s=30,
            what="the disconnected gauge growing",
        )
        assert worker.proc.poll() is None, "the worker exited instead of waiting"

        server = subprocess.Popen(
            dev_server_command(temporal_port, ui_port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

        def ready() -> httpx.Response | None:
            r = worker.get("/readyz")
            return r if r is not None and r.status_code == 200 else None

        # At most one backoff wait plus one attempt after the server is up.
        r = wait_until(ready, timeout_s=60 + MAX_WAIT_S, interval_s=0.3, what="ready once Temporal is up")
        assert queue in r.text, r.text
        assert worker.disconnected_s() == 0
        assert any("retrying in" in line for line in worker.lines), worker.lines[-5:]
    finally:
        code = worker.stop()
        if server is not None:
            server.terminate()
            server.wait(30)
    assert code == 0, "\n".join(worker.lines[-20:])


def test_a_configuration_error_still_exits_2_at_once(tmp_path: Path) -> None:
    """A TLS file that cannot be read is the operator's to fix: waiting would hide it."""
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    data = fleet_config_data()
    data["temporal"]["tls"] = {"server_root_ca_cert_path": str(fifo)}
    cfg = tmp_path / "fleet.yaml"
    cfg.write_text(yaml.safe_dump(data))
    done = subprocess.run(
        [sys.executable, "-m", "drctl", "worker", "-c", str(cfg), "--http-port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stderr
    assert "temporal.tls.server_root_ca_cert_path" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("seed", range(5))
def test_backoff_grows_with_jitter_and_is_capped(seed: int) -> None:
    import random

    rng = random.Random(seed)
    waits = [wait_s(n, rng) for n in range(12)]
    assert all(0 < w <= MAX_WAIT_S for w in waits)
    assert waits[0] < waits[4] and waits[-1] >= MAX_WAIT_S / 2  # doubles, then stays at the cap
    assert len({round(w, 6) for w in waits[-4:]}) > 1  # jittered, not in step with other workers
