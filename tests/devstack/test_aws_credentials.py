"""The session dev stack's AWS endpoint demands session tokens, and its workers hold temporary keys.

The stack's "moto" component is moto behind drctl.devstack.s3_auth_proxy. Workers (`drctl dev up
--workers`, and the in-process ones tests start) get keys from moto's STS through it, so a drctl
path that drops the token fails here with the 403 S3 gives, instead of passing against bare moto.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from drctl.config.schema import FleetConfig
from drctl.devstack import processes, stack, worker_credentials
from drctl.models.rpo import replica_pairs
from drctl.providers import aws
from drctl.providers.rclone import Rclone
from tests.support.config import fleet_config_data
from tests.support.ports import free_port
from tests.support.wait import wait_until
from tests.support.workers import temporary_keys


def _s3(cfg: FleetConfig, keys: dict[str, str], token: str | None) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=cfg.aws.endpoint_url,
        region_name=cfg.aws.region,
        aws_access_key_id=keys["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=token,
    )


def test_a_worker_key_without_its_token_is_refused_as_s3_refuses_it(
    fleet_config: FleetConfig, dev_stack: stack.StackInfo
) -> None:
    keys = worker_credentials.worker_env(fleet_config, "drctl-test-refusal")
    assert keys["AWS_ACCESS_KEY_ID"].startswith("ASIA") and keys["AWS_SESSION_TOKEN"]
    bucket = fleet_config.drills.history_bucket
    for token, (status, code) in {None: (403, "InvalidAccessKeyId"), "other": (400, "InvalidToken")}.items():
        with pytest.raises(ClientError) as info:
            _s3(fleet_config, keys, token).list_objects_v2(Bucket=bucket)
        err = info.value.response
        assert (err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"]) == (status, code)
    _s3(fleet_config, keys, keys["AWS_SESSION_TOKEN"]).list_objects_v2(Bucket=bucket)
    # Refusals are written to the component's log, so a path that dropped its token shows by name.
    log = Path(dev_stack.state_dir) / "logs" / "moto.log"
    assert f"refused GET /{bucket}" in log.read_text()


def test_drctl_paths_carry_the_token_under_the_workers_keys(
    fleet_config: FleetConfig, dev_stack: stack.StackInfo
) -> None:
    """The keys in-process workers run with: drctl's boto3 client and its rclone both pass."""
    with temporary_keys(fleet_config):
        keys = aws.resolved_keys()
        assert keys is not None and keys.access_key.startswith("ASIA") and keys.token
        aws.client(fleet_config, "s3").list_objects_v2(Bucket=fleet_config.drills.history_bucket)
        pair = next(p for p in replica_pairs(fleet_config) if p.bucket == "models")
        lag = Rclone(fleet_config).measure_lag(pair)
        assert lag.error is None, lag


def test_dev_up_gives_each_worker_and_only_workers_temporary_keys(
    fleet_config: FleetConfig, dev_stack: stack.StackInfo
) -> None:
    comps = {c.name: c for c in stack.components(fleet_config, Path(dev_stack.config_path), workers=True)}
    env = stack.worker_env(fleet_config, comps["worker-us-west-1"])
    assert env["AWS_ACCESS_KEY_ID"].startswith("ASIA") and env["AWS_SESSION_TOKEN"]
    assert stack.worker_env(fleet_config, comps["region-us-west-1"]) == {}
    # A fresh set per start, as each pod of a role gets its own session.
    assert stack.worker_env(fleet_config, comps["worker-us-west-1"]) != env


def test_issued_keys_outlive_a_restart_of_the_aws_endpoint(tmp_path: Path) -> None:
    """`drctl dev up` restarts a dead moto and leaves running workers alone: their keys must still
    pass, as IAM keeps a session's keys while moto's memory does not."""
    port, issued = free_port(), tmp_path / "issued.json"
    argv = [
        sys.executable,
        "-m",
        "drctl.devstack.s3_auth_proxy",
        "--port",
        str(port),
        "--issued-file",
        str(issued),
    ]
    cfg = FleetConfig.model_validate(
        {**fleet_config_data(), "aws": {"region": "us-east-1", "endpoint_url": f"http://127.0.0.1:{port}"}}
    )
    with _running(argv, port):
        keys = worker_credentials.worker_env(cfg, "drctl-test-restart")
    assert oct(issued.stat().st_mode & 0o777) == "0o600"
    with _running(argv, port):
        s3 = _s3(cfg, keys, keys["AWS_SESSION_TOKEN"])
        s3.create_bucket(Bucket="after-restart")
        assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["after-restart"]
        with pytest.raises(ClientError, match="InvalidAccessKeyId"):
            _s3(cfg, {**keys, "AWS_ACCESS_KEY_ID": "ASIANEVERISSUED0000"}, "t").list_buckets()


@contextmanager
def _running(argv: list[str], port: int) -> Iterator[None]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: processes.port_open(port), timeout_s=30, what="the AWS endpoint up")
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=10)
