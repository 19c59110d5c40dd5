"""The backup stack: moto S3 and two emulated clusters, each with its Velero agent (registered as the
`backup_stack` fixture by tests/upgrade/conftest.py). As real Velero, each agent sees a backup taken in
the other cluster only after its backup sync imported it (`devstack.velero_backup_sync_s`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from drctl.config.schema import FleetConfig, parse_config
from drctl.devstack.kube import RegionCluster, serve_cluster
from drctl.devstack.velero_agent import VeleroAgent
from tests.support.moto import aws_client, moto_server, port_of
from tests.support.ports import free_port

REGIONS = ("us-west-1", "us-east-1")


@dataclass
class BackupStack:
    cfg: FleetConfig
    clusters: dict[str, RegionCluster]
    s3: object
    agents: dict[str, VeleroAgent] = field(default_factory=dict)


def _config(moto_port: int, kube_ports: dict[str, int], sync_s: float) -> FleetConfig:
    regions = "\n".join(
        f"""  - name: {r}
    weight: {60 if i == 0 else 40}
    gateway_url: http://127.0.0.1:{free_port()}
    kube: {{api_url: "http://127.0.0.1:{kube_ports[r]}"}}"""
        for i, r in enumerate(REGIONS)
    )
    text = f"""
name: velero-test
regions:
{regions}
traffic:
  global_endpoint: http://127.0.0.1:{free_port()}
  global: {{kind: haproxy, runtime_socket: /nonexistent.sock}}
  regional: {{kind: gateway-api}}
aws: {{region: us-east-1, endpoint_url: "http://127.0.0.1:{moto_port}"}}
backup: {{timeout_s: 10, sync_timeout_s: 10}}
devstack: {{velero_backup_sync_s: {sync_s}}}
"""
    return parse_config(text)


async def _seed(cluster: RegionCluster, cfg: FleetConfig, region: str) -> None:
    ns = cfg.region(region).kube.namespace
    for name in (ns, cfg.backup.namespace):
        await cluster.ensure("v1/namespaces", {"metadata": {"name": name}})
    await cluster.ensure(
        "velero.io/v1/backupstoragelocations",
        {
            "metadata": {"name": "default", "namespace": cfg.backup.namespace},
            "spec": {"provider": "aws", "objectStorage": {"bucket": cfg.backup.bucket}},
        },
    )


@asynccontextmanager
async def backup_clusters(sync_s: float = 0.3) -> AsyncIterator[BackupStack]:
    """A fresh stack whose agents run backup sync every `sync_s` seconds."""
    with moto_server() as moto_url:
        ports = {r: free_port() for r in REGIONS}
        cfg = _config(port_of(moto_url), ports, sync_s)
        s3 = aws_client("s3", cfg.aws.endpoint_url)
        s3.create_bucket(Bucket=cfg.backup.bucket)
        async with (
            serve_cluster("127.0.0.1", ports[REGIONS[0]]) as west,
            serve_cluster("127.0.0.1", ports[REGIONS[1]]) as east,
        ):
            clusters = {REGIONS[0]: west, REGIONS[1]: east}
            for region, cluster in clusters.items():
                await _seed(cluster, cfg, region)
            agents = {r: VeleroAgent(cfg, r, poll_s=0.05) for r in REGIONS}
            tasks = [asyncio.create_task(a.run()) for a in agents.values()]
            try:
                yield BackupStack(cfg=cfg, clusters=clusters, s3=s3, agents=agents)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture(scope="session")
async def backup_stack() -> AsyncIterator[BackupStack]:
    async with backup_clusters() as stack:
        yield stack
