"""A saturated replica, as the real prober reads it: a fleetsim server (vLLM's queueing: max_num_seqs
running, the rest waiting) filled by users' requests. Its probe fails for a late first token, its
/metrics show the queue and the requests it keeps finishing, and `saturation` says so across two
probes; with the users gone it passes. A server that is down is never saturated."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bench.probe_scale import MODEL, StaticReplicas, bench_config
from drctl.models.health import ProbeStatus
from drctl.models.saturation import finished_total, saturation
from drctl.providers.probe import InferenceProber
from tests.support.ports import free_port
from tests.support.wait import wait_until

SEQS = 2  # max_num_seqs: two requests run, the rest wait
TOKENS = 40  # at 25 ms a token, one request holds a slot for about 1 s


@pytest.fixture
def fleetsim(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "FLEETSIM_MODEL": MODEL,
        "FLEETSIM_MAX_NUM_SEQS": str(SEQS),
        "FLEETSIM_TTFT_MS": "20",
        "FLEETSIM_ITL_MS": "25",
    }
    with (tmp_path / "fleetsim.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "drctl.devstack.fleetsim", "--host", "127.0.0.1", "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{url}/health"), 30, 0.1, "fleetsim answering")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1, trust_env=False).status_code == 200
    except httpx.TransportError:
        return False


async def _users(url: str, n: int) -> None:
    """n users at once, each one bounded non-streamed completion (bounded in count and time)."""
    body = {"model": MODEL, "prompt": "hi", "max_tokens": TOKENS}
    async with httpx.AsyncClient(trust_env=False, timeout=30) as client:
        await asyncio.gather(*(client.post(f"{url}/v1/completions", json=body) for _ in range(n)))


async def test_a_full_queue_that_keeps_finishing_reads_as_saturated_and_idle_passes(fleetsim: str) -> None:
    # A 300 ms first-token bound: the probe's completion waits behind 10 requests of about 1 s each.
    prober = InferenceProber(
        bench_config(fleetsim, 4, 1.0, timeout_s=2.0, ttft_ms=300.0),
        replica_source=StaticReplicas([fleetsim]),
    )
    users = asyncio.create_task(_users(fleetsim, 6 * SEQS))
    try:
        await asyncio.sleep(0.3)  # the users are in: SEQS running, the rest waiting
        first = await prober.probe_region("r1")
        await asyncio.sleep(1.2)  # at least one request finished since
        second = await prober.probe_region("r1")
    finally:
        await asyncio.wait_for(users, 60)
    replica = second.replicas[0]
    assert second.status is not ProbeStatus.HEALTHY, second
    assert replica.error_class in ("slow", "timeout") and (replica.queue_depth or 0) > 0, replica
    # The region runs 2 replicas; the other one is gone (its node lost), this one is full.
    why = saturation(second, finished_total(first), expected_replicas=2)
    assert why is not None and why.startswith("saturated, not down:"), (first, second)
    assert saturation(second, finished_total(second), 2) is None  # no progress between the two: hung
    assert saturation(second, finished_total(first), 1) is None  # nothing lost: slow, not short
    idle = await prober.probe_region("r1")
    assert idle.status is ProbeStatus.HEALTHY and saturation(idle, finished_total(second), 2) is None


async def test_a_server_that_is_gone_is_never_saturated() -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    prober = InferenceProber(
        bench_config(closed, 4, 1.0, timeout_s=1.0), replica_source=StaticReplicas([closed])
    )
    probe = await prober.probe_region("r1")
    assert probe.status is ProbeStatus.DOWN and probe.replicas[0].error_class == "connect", probe
    assert saturation(probe, 0.0, expected_replicas=2) is None
