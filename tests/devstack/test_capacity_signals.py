"""read_capacity_signals on the dev stack: replicas from the emulated clusters' EndpointSlices, real
fleetsim /metrics under real streams through the global endpoint, and one replica killed for good.

Run in Temporal's ActivityEnvironment (the activity context without a server): what is tested is
the reading itself, against the stack's components; the stub's policy is checked in tests/units.
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.capacity import CapacityActivities
from drctl.config.schema import FleetConfig
from drctl.devstack.stack import StackInfo
from drctl.models.capacity import CapacitySpec, region_capacity
from drctl.models.capacity_sample import CapacityReadInput, CapacityReadResult

pytestmark = pytest.mark.devstack

STREAMS = 8  # concurrent streams through the global endpoint
MAX_TOKENS = 60  # fleetsim's 5 ms between tokens: about 0.3 s a request, so some are always running


def _stream(cfg: FleetConfig, stop: threading.Event, codes: list[int], deadline_s: float) -> None:
    body = {"model": cfg.workload.model, "prompt": "hi", "max_tokens": MAX_TOKENS, "stream": True}
    end = time.monotonic() + deadline_s
    with httpx.Client(timeout=10, trust_env=False) as c:
        for _ in range(500):  # bounded in count as well as in time
            if stop.is_set() or time.monotonic() > end:
                return
            try:
                with c.stream("POST", f"{cfg.traffic.global_endpoint}/v1/completions", json=body) as resp:
                    resp.read()
                    codes.append(resp.status_code)
            except httpx.HTTPError:
                codes.append(0)  # a stream cut by the killed replica


async def _read(acts: CapacityActivities, prev: CapacityReadResult | None) -> CapacityReadResult:
    inp = CapacityReadInput(region="us-west-1", previous=prev.sample if prev else None)
    return await ActivityEnvironment().run(acts.read_capacity_signals, inp)  # type: ignore[no-any-return]


def test_signals_follow_the_load_and_a_replica_lost_for_good(
    fleet_config: FleetConfig, dev_stack: StackInfo, reset_fleet: None
) -> None:
    cfg = fleet_config
    west = cfg.region("us-west-1")
    assert west.devstack_admin_url and west.replicas == 2
    acts = CapacityActivities(cfg)
    stop = threading.Event()
    codes: list[int] = []
    served: list[int] = []
    loaders = [
        threading.Thread(target=_stream, args=(cfg, stop, codes, 40), daemon=True) for _ in range(STREAMS)
    ]

    async def run() -> tuple[CapacityReadResult, CapacityReadResult, CapacityReadResult, CapacityReadResult]:
        idle = await _read(acts, None)
        for t in loaders:
            t.start()
        await asyncio.sleep(2)
        start = await _read(acts, None)
        await asyncio.sleep(2)
        loaded = await _read(acts, start)
        served.extend(codes)  # before the kill: a killed replica's streams may end in a 5xx
        async with httpx.AsyncClient(timeout=10, trust_env=False) as admin:
            resp = await admin.post(
                f"{west.devstack_admin_url}/faults/replicas",
                json={"action": "kill", "count": 1, "stay_down": True},
            )
            resp.raise_for_status()
        deadline = time.monotonic() + 20
        lost = await _read(acts, loaded)
        while lost.signals.ready_replicas != 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            lost = await _read(acts, lost)
        await asyncio.sleep(1.5)  # a window with the survivor alone
        return idle, start, loaded, await _read(acts, lost)

    try:
        idle, start, loaded, lost = asyncio.run(run())
    finally:
        stop.set()
        for t in loaders:
            t.join(timeout=15)

    s = idle.signals
    assert (s.region, s.ready_replicas, s.desired_replicas, s.replicas_read) == ("us-west-1", 2, 2, 2), s
    assert s.problems == [] and s.window_s == 0 and s.load_rps is None
    assert len(idle.sample.replicas) == 2

    s = loaded.signals
    # Two seconds of streams: us-west-1 takes its 60 % share; every answer was a 200.
    assert s.problems == [] and 1.5 < s.window_s < 10, s
    assert s.requests and s.requests > 5 and s.load_rps and s.load_rps > 2, s
    assert s.error_rate == 0 and s.ttft_p99_ms is not None and s.ttft_p99_ms < 1000, s
    assert s.running > 0, s
    assert served and set(served) == {200}, set(served)

    s = lost.signals
    # One replica killed and kept down: one ready, two still asked for, and the survivor read.
    assert (s.ready_replicas, s.desired_replicas, s.replicas_read) == (1, 2, 1), s
    assert s.load_rps and s.load_rps > 1 and s.problems == [], s
    # The model sees a region at half its capacity (2 a replica configured here, to make it bind).
    cap = region_capacity(s, CapacitySpec(max_concurrency_per_replica=2, target_utilisation=0.8))
    assert cap.capacity == 2 and cap.evidence["ready_replicas"] == 1
    assert start.signals.ready_replicas == 2


def test_a_region_the_worker_does_not_know_fails_at_once(fleet_config: FleetConfig) -> None:
    acts = CapacityActivities(fleet_config)
    with pytest.raises(ApplicationError, match="no region 'mars-1'") as err:
        asyncio.run(ActivityEnvironment().run(acts.read_capacity_signals, CapacityReadInput(region="mars-1")))
    assert err.value.non_retryable and err.value.type == "UnknownRegion"
