"""drctl's HTTP servers (the test stub, the codec server, the worker's endpoint) listen with a deep
accept queue.

http.server listens with a backlog of 5: past it the kernel drops a burst's SYNs, and a client
whose connect timeout is shorter than the 3 s SYN retransmit fails although the server is up
(CI: a global HAProxy redispatched 40 requests at once to a stub whose serving thread waited for
the GIL, and two of them got 503). Connects here are made before the server accepts any.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import shutil
import socket

from drctl.client.codec import AesGcmCodec, parse_keys
from drctl.client.codec_server import CodecServer
from drctl.config.schema import load_config
from drctl.worker.endpoint import serve
from drctl.worker.link import TemporalLink
from tests.support.config import write_fleet_config
from tests.support.http_stub import Reply, StubServer
from tests.support.ports import free_port

BURST = 64


def _burst_connects(port: int) -> int:
    """How many of BURST connects complete within 0.5 s each while nothing accepts."""
    done = 0
    with contextlib.ExitStack() as stack:
        for _ in range(BURST):
            s = stack.enter_context(socket.socket())
            s.settimeout(0.5)
            try:
                s.connect(("127.0.0.1", port))
            except OSError:
                break
            done += 1
    return done


def test_the_stub_server_queues_a_burst_before_it_accepts() -> None:
    stub = StubServer(lambda _req: Reply(200, b"ok"))  # not started: nothing accepts yet
    try:
        assert _burst_connects(stub.port) == BURST
    finally:
        stub._server.server_close()


def test_the_codec_server_queues_a_burst_before_it_accepts() -> None:
    key = base64.b64encode(b"k" * 32).decode()
    codec = AesGcmCodec(parse_keys(f"k1={key}", "test"), "default")
    httpd = CodecServer(codec, [], "token", []).serve("127.0.0.1", 0)
    try:
        assert _burst_connects(httpd.server_address[1]) == BURST
    finally:
        httpd.server_close()


def test_the_worker_endpoint_queues_a_burst_before_it_accepts() -> None:
    path = write_fleet_config()
    try:
        cfg = load_config(path)
        cfg = cfg.model_copy(update={"worker": cfg.worker.model_copy(update={"http_host": "127.0.0.1"})})
        port = free_port()

        async def burst() -> int:
            async with serve(cfg, None, lambda: [], port, link=TemporalLink("127.0.0.1:1")):
                # Called on the event loop itself: nothing accepts while the burst connects.
                return _burst_connects(port)

        assert asyncio.run(burst()) == BURST
    finally:
        shutil.rmtree(path.parent, ignore_errors=True)
