"""A fleet's passive signals on the dev stack: real gateways, replicas found through EndpointSlices.

Load goes through the global endpoint (both regions get their share); an inference error fault in
us-east-1 must make it SUSPECT from its own counters while us-west-1 stays OK.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from drctl.config.schema import FleetConfig
from drctl.devstack.stack import StackInfo
from drctl.models.passive import PassiveSignal, PassiveVerdict
from drctl.providers.passive import PassiveReader
from drctl.providers.replicas import KubernetesReplicaSource

pytestmark = pytest.mark.devstack


def _load(cfg: FleetConfig, stop: threading.Event, deadline_s: float) -> None:
    body = {"model": cfg.workload.model, "prompt": "hi", "max_tokens": 2}
    end = time.monotonic() + deadline_s
    with httpx.Client(timeout=5, trust_env=False) as c:
        while not stop.is_set() and time.monotonic() < end:
            c.post(f"{cfg.traffic.global_endpoint}/v1/completions", json=body)


async def _until(
    reader: PassiveReader, ok: Callable[[dict[str, PassiveVerdict]], bool], timeout_s: float
) -> dict[str, PassiveVerdict]:
    """Read as a watcher would (every 0.5 s here) until `ok` holds or time runs out; the last verdicts."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = {v.region: v for v in await reader.read()}
        if ok(got) or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.5)


def test_error_fault_makes_only_that_region_suspect(
    fleet_config: FleetConfig, dev_stack: StackInfo, reset_fleet: None
) -> None:
    cfg = fleet_config
    east = cfg.region("us-east-1")
    assert east.devstack_admin_url
    stop = threading.Event()
    loader = threading.Thread(target=_load, args=(cfg, stop, 30), daemon=True)

    async def run() -> tuple[dict[str, PassiveVerdict], dict[str, PassiveVerdict]]:
        reader = PassiveReader(cfg, KubernetesReplicaSource(cfg))
        try:
            healthy = await _until(
                reader, lambda g: all(v.signal is PassiveSignal.OK for v in g.values()), 15
            )
            async with httpx.AsyncClient(timeout=5, trust_env=False) as admin:
                resp = await admin.post(
                    f"{east.devstack_admin_url}/faults/inference", json={"error_rate": 0.6}
                )
                resp.raise_for_status()
            faulted = await _until(reader, lambda g: g["us-east-1"].signal is PassiveSignal.SUSPECT, 15)
            return healthy, faulted
        finally:
            await reader.aclose()

    loader.start()
    try:
        healthy, faulted = asyncio.run(run())
    finally:
        stop.set()
        loader.join(timeout=10)
    assert all(v.signal is PassiveSignal.OK for v in healthy.values()), {
        r: v.reason for r, v in healthy.items()
    }
    assert {v.kind for v in healthy["us-west-1"].views} == {"gateway", "replica"}
    east_v = faulted["us-east-1"]
    assert east_v.signal is PassiveSignal.SUSPECT, east_v.reason
    # Both the gateway's counters and the replicas' own see it.
    assert "gateway error rate" in east_v.reason and "replica error rate" in east_v.reason, east_v.reason
    assert faulted["us-west-1"].signal is PassiveSignal.OK, faulted["us-west-1"].reason
