"""Velero's object layout in S3, as the dev stack's Velero agent writes and reads it.

    backups/<name>/velero-backup.json      the Backup object
    backups/<name>/<name>.tar.gz           resources/<resource>[.<group>]/namespaces/<ns>/<name>.json

Sync (boto3): the agent calls it through `asyncio.to_thread`.
"""

from __future__ import annotations

import io
import json
import tarfile
from datetime import timedelta
from typing import Any

import boto3
from botocore.config import Config as BotoConfig

from drctl.config.schema import FleetConfig


def go_duration(ttl: str) -> timedelta:
    """Velero's Go duration, e.g. 720h0m0s."""
    total, num = 0.0, ""
    units = {"h": 3600, "m": 60, "s": 1}
    for ch in ttl:
        if ch.isdigit() or ch == ".":
            num += ch
        elif ch in units and num:
            total += float(num) * units[ch]
            num = ""
    return timedelta(seconds=total)


class BackupStore:
    def __init__(self, cfg: FleetConfig) -> None:
        self.cfg = cfg
        self.s3 = boto3.client(
            "s3",
            endpoint_url=cfg.aws.endpoint_url,
            region_name=cfg.aws.region,
            aws_access_key_id="drctl-dev",
            aws_secret_access_key="drctl-dev",
            config=BotoConfig(retries={"max_attempts": 2}, connect_timeout=2, read_timeout=5),
        )

    def upload(
        self, bucket: str, name: str, backup: dict[str, Any], items: list[tuple[str, dict[str, Any]]]
    ) -> None:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for member, obj in items:
                data = json.dumps(obj, indent=2).encode()
                info = tarfile.TarInfo(member)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        self.s3.put_object(Bucket=bucket, Key=f"backups/{name}/{name}.tar.gz", Body=buf.getvalue())
        self.s3.put_object(
            Bucket=bucket,
            Key=f"backups/{name}/velero-backup.json",
            Body=json.dumps(backup, indent=2).encode(),
        )

    def list_backups(self, bucket: str) -> list[str]:
        """Names of the backups in the bucket: each `backups/<name>/` prefix (Velero's ListBackups)."""
        names: list[str] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix="backups/", Delimiter="/"
        ):
            names += [p["Prefix"].split("/")[1] for p in page.get("CommonPrefixes") or []]
        return names

    def metadata(self, bucket: str, name: str) -> dict[str, Any]:
        """The Backup object as its cluster wrote it (velero-backup.json)."""
        body = self.s3.get_object(Bucket=bucket, Key=f"backups/{name}/velero-backup.json")["Body"].read()
        return dict(json.loads(body))

    def download(self, bucket: str, backup_name: str) -> list[dict[str, Any]]:
        key = f"backups/{backup_name}/{backup_name}.tar.gz"
        body = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        out: list[dict[str, Any]] = []
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as tar:
            for member in tar.getmembers():
                f = tar.extractfile(member)
                if f is not None and member.name.startswith("resources/"):
                    out.append(json.loads(f.read()))
        return out
