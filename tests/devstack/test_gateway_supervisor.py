"""The region gateway's supervisor: however starts and restores overlap, one HAProxy runs.

CI once saw a restore and the supervisor's restart spawn two. The second failed on the abns@
track sockets the first held, and its exit left the runtime socket path dead: the replicas never
joined the HAProxy that served, and the region answered 503 until the test gave up.
"""

from __future__ import annotations

import asyncio

from drctl.config.schema import load_config
from drctl.devstack.haproxy_conf import haproxy_dir, partition_acl, render_region
from drctl.devstack.processes import pids_mentioning
from drctl.devstack.region import Gateway
from tests.support.config import write_fleet_config

REGION = "us-west-1"


async def test_overlapping_starts_and_restores_run_one_haproxy() -> None:
    cfg = load_config(write_fleet_config())
    haproxy_dir(cfg).mkdir(parents=True, exist_ok=True)
    (haproxy_dir(cfg) / f"{REGION}.cfg").write_text(render_region(cfg, REGION))
    partition_acl(cfg, REGION).write_text("")
    gateway = Gateway(cfg, REGION)
    try:
        await asyncio.gather(gateway.start(), gateway.start(), gateway.restore())
        assert pids_mentioning(str(gateway.config_path)) == [gateway.pid]
        assert "Name: HAProxy" in await asyncio.to_thread(gateway.runtime.command, "show info")

        await gateway.kill()
        assert gateway.pid is None and pids_mentioning(str(gateway.config_path)) == []
        # The operator's restore and the supervisor's restart of a dead gateway, at once.
        await asyncio.gather(gateway.restore(), gateway.start())
        assert gateway.fault is None and pids_mentioning(str(gateway.config_path)) == [gateway.pid]
        assert "Name: HAProxy" in await asyncio.to_thread(gateway.runtime.command, "show info")
        assert gateway.epoch == 2  # one spawn per outage, so the node agent re-joins the replicas once
    finally:
        await gateway.stop()
    assert pids_mentioning(str(gateway.config_path)) == []
