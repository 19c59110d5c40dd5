"""A moto server of its own for the rclone provider tests (module scope; no dev stack needed)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import free_port, wait_until

VENV_BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"


@pytest.fixture(scope="module")
def moto_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    workdir = tmp_path_factory.mktemp("moto")
    log = (workdir / "moto.log").open("wb")
    proc = subprocess.Popen(
        [str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=log,
        cwd=workdir,
    )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, f"moto_server exited with {proc.returncode}"
        try:
            return httpx.get(f"{url}/moto-api/data.json", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(up, timeout_s=30, what="moto server up")
    yield url
    proc.terminate()
    proc.wait(timeout=10)
