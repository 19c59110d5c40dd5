"""Seed the dev stack's moto server with what the fleet config expects to exist.

moto keeps everything in memory, so this runs after every moto start; each step is idempotent.
"""

from __future__ import annotations

import uuid

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from drctl.config import FleetConfig

HOSTED_ZONE = "drctl.test."


def aws_client(cfg: FleetConfig, service: str):  # type: ignore[no-untyped-def]
    # moto accepts any credentials; fixed ones keep a developer's real AWS profile out of it.
    return boto3.client(
        service,
        endpoint_url=cfg.aws.endpoint_url,
        region_name=cfg.aws.region,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=Config(retries={"max_attempts": 2}, connect_timeout=2, read_timeout=5),
    )


def ensure_buckets(cfg: FleetConfig) -> list[str]:
    s3 = aws_client(cfg, "s3")
    wanted = [cfg.backup.bucket, cfg.drills.history_bucket]
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    for name in wanted:
        if name in existing:
            continue
        kwargs: dict = {"Bucket": name}
        if cfg.aws.region != "us-east-1":  # S3 rejects an explicit us-east-1 location constraint
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": cfg.aws.region}
        try:
            s3.create_bucket(**kwargs)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise
    return wanted


def ensure_hosted_zone(cfg: FleetConfig, name: str = HOSTED_ZONE) -> str:
    """Create the hosted zone route53 demos use, once; return its id."""
    r53 = aws_client(cfg, "route53")
    for zone in r53.list_hosted_zones_by_name(DNSName=name).get("HostedZones", []):
        if zone["Name"] == name:
            return str(zone["Id"]).rsplit("/", 1)[-1]
    created = r53.create_hosted_zone(Name=name, CallerReference=f"drctl-dev-{uuid.uuid4()}")
    return str(created["HostedZone"]["Id"]).rsplit("/", 1)[-1]


def seed(cfg: FleetConfig) -> None:
    ensure_buckets(cfg)
    ensure_hosted_zone(cfg)
