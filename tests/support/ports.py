"""Loopback ports for test servers: free now, and never handed out by the kernel on its own."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _port_slice() -> range:
    """This test process's share of the loopback ports below the kernel's ephemeral range.

    A test picks a port long before the server it names binds it (a config is written, then a
    stack comes up). A port from the ephemeral range can meanwhile become the local end of any
    outbound connection (CI saw a worker's HTTP port taken so). Ports below that range are
    never handed out by the kernel, and each xdist worker gets its own slice of them, so two
    test processes never pick the same port either.
    """
    low, high = 10000, _ephemeral_low()
    if high - low < 2000:
        return range(0)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    index = int(worker) if worker.isdigit() else 0
    size = (high - low) // max(count, index + 1)
    return range(low + index * size, low + (index + 1) * size)


_next_port: list[int] = []


def free_port() -> int:
    """A loopback TCP port that is free right now and that the kernel will not hand out on its own."""
    ports = _port_slice()
    if not _next_port:
        _next_port.append(random.randrange(len(ports)) if ports else 0)
    for _ in range(len(ports)):
        port = ports[_next_port[0] % len(ports)]
        _next_port[0] += 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_run(n: int, attempts: int = 20, host: str = "127.0.1.1") -> int:
    """A first port P with P..P+n-1 all free on `host` (default the bench's first target address)."""
    ports = _port_slice()
    if len(ports) < 2 * n:
        ports = range(10000, 32768)
    # Candidate runs n apart from a random start: consecutive bases would all overlap one taken port.
    start = random.randrange(len(ports) - n)
    for i in range(attempts):
        base = ports[0] + (start + i * n) % (len(ports) - n)
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind((host, port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no run of {n} free ports on {host} in {attempts} attempts")


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port` right now."""
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex(("127.0.0.1", port)) == 0
