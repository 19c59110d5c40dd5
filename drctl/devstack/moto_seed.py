"""Seed the dev stack's moto server with what the fleet config expects to exist.

moto keeps everything in memory, so this runs after every moto start; each step is idempotent.
"""

from __future__ import annotations

import uuid

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from drctl.config.schema import FleetConfig

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


# A small fake model: what a standby region must already hold to serve (weights, a LoRA adapter,
# tokenizer files). Sizes are tiny so seeding and copying stay fast; the layout is vLLM's.
MODEL_FILES: dict[str, bytes] = {
    "fleetsim-tiny/config.json": b'{"architectures": ["FleetsimForCausalLM"], "hidden_size": 64}\n',
    "fleetsim-tiny/model.safetensors": bytes(range(256)) * 64,
    "fleetsim-tiny/tokenizer.json": b'{"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1}}}\n',
    "fleetsim-tiny/tokenizer_config.json": b'{"model_max_length": 2048}\n',
    "adapters/support-lora/adapter_config.json": b'{"r": 8, "lora_alpha": 16, "base_model": "fleetsim-tiny"}\n',
    "adapters/support-lora/adapter_model.safetensors": bytes(reversed(range(256))) * 16,
}
MODEL_BUCKET = "models"  # the data.buckets[] entry the fake model is seeded into


def seed_model(cfg: FleetConfig) -> int:
    """Put the fake model into the models bucket and its replicas (in sync from the start, as after
    a completed first replication); objects already present are left alone. Returns objects written."""
    s3 = aws_client(cfg, "s3")
    written = 0
    for b in cfg.data.buckets:
        if b.name != MODEL_BUCKET:
            continue
        for loc in [b.source, *b.replicas]:
            have = {o["Key"] for o in s3.list_objects_v2(Bucket=loc.bucket).get("Contents", [])}
            for key, body in MODEL_FILES.items():
                if key not in have:
                    s3.put_object(Bucket=loc.bucket, Key=key, Body=body)
                    written += 1
    return written


def ensure_buckets(cfg: FleetConfig) -> list[str]:
    s3 = aws_client(cfg, "s3")
    wanted = [cfg.backup.bucket, cfg.drills.history_bucket]
    wanted += [
        loc.bucket for b in cfg.data.buckets for loc in [b.source, *b.replicas] if loc.bucket not in wanted
    ]
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
            if exc.response.get("Error", {}).get("Code") not in (
                "BucketAlreadyOwnedByYou",
                "BucketAlreadyExists",
            ):
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
    seed_model(cfg)
