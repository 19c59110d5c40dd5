"""The one moto fixture: a real `moto_server` subprocess on a free loopback port.

A subprocess each, not moto's in-process ThreadedMotoServer: in-process servers share moto's global
backends, so two modules (or the backup stack and a module) would see each other's buckets and
zones. cwd is the server's own directory: moto's request recorder writes its `moto_recording` file
there.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest

from tests.support.ports import free_port
from tests.support.wait import wait_until

MOTO_SERVER = Path(sys.executable).parent / "moto_server"


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


@contextmanager
def moto_server(workdir: Path | None = None) -> Iterator[str]:
    """`with moto_server() as url:` a moto server answers S3 and Route 53 at `url` until the block exits."""
    port = free_port()
    workdir = workdir or Path(tempfile.mkdtemp(prefix="drctl-moto-"))
    with (workdir / "moto.log").open("wb") as log:
        proc = subprocess.Popen(
            [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log, cwd=workdir
        )
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, f"moto_server exited with {proc.returncode} (log: {workdir}/moto.log)"
        try:
            return httpx.get(f"{url}/moto-api/data.json", timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(up, timeout_s=30, what="moto server up")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def moto_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A moto server for the module's tests."""
    with moto_server(tmp_path_factory.mktemp("moto")) as url:
        yield url


def aws_client(service: str, endpoint_url: str | None, key: str = "t") -> Any:
    """A boto3 client for moto (or a stand-in in front of it): any credentials do, but some must be set."""
    return boto3.client(
        service,
        endpoint_url=endpoint_url,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=key,
    )
