"""Temporary AWS credentials for the dev stack's workers, from moto's STS, as production has them.

In production a worker runs with IRSA or an assumed role: temporary keys (`ASIA...`) that S3 refuses
without their session token. The dev stack's workers get the same kind: an AssumeRole through the
stack's SigV4 checker (s3_auth_proxy.py), which remembers the keys it saw issued and refuses them
afterwards unless the token comes along. A drctl path that drops the token (a boto3 client built
with the keys alone, an rclone remote without SESSION_TOKEN) then fails with 403, here as on AWS.

The keys reach the worker the way a container gets them from its runtime: AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN in its environment, read by boto3's chain.
The stack's own long-term admin paths (seeding buckets, its Velero) keep their fixed keys.
"""

from __future__ import annotations

import boto3
from botocore.config import Config

from drctl.config.schema import FleetConfig

WORKER_ROLE = "arn:aws:iam::123456789012:role/drctl-worker"
# Long-term keys of the "account" that assumes the worker role; the checker passes them through.
_ADMIN = {"aws_access_key_id": "drctl-dev-admin", "aws_secret_access_key": "drctl-dev-admin"}
# moto does not expire keys, and neither does the checker; a day outlasts any dev session's worker.
_DURATION_S = 12 * 3600


def worker_env(cfg: FleetConfig, session_name: str) -> dict[str, str]:
    """Environment variables holding fresh temporary keys for one worker (or test process)."""
    sts = boto3.client(
        "sts",
        endpoint_url=cfg.aws.endpoint_url,
        region_name=cfg.aws.region,
        config=Config(retries={"max_attempts": 3}, connect_timeout=2, read_timeout=10),
        **_ADMIN,
    )
    creds = sts.assume_role(RoleArn=WORKER_ROLE, RoleSessionName=session_name, DurationSeconds=_DURATION_S)[
        "Credentials"
    ]
    return {
        "AWS_ACCESS_KEY_ID": creds["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
        "AWS_SESSION_TOKEN": creds["SessionToken"],
    }
