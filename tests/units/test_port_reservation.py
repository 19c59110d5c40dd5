"""A pod's port is held by the node agent for the pod's life (nodeagent.reserve_port): refused while no
process of the pod listens, never handed to anyone else, and free again once released."""

from __future__ import annotations

import socket

import pytest

from drctl.devstack.nodeagent import reserve_port


def _listen(port: int) -> socket.socket:
    """What fleetsim does on each (re)start: bind the pod's port with SO_REUSEPORT, then listen."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_the_port_refuses_until_the_replica_listens_and_again_after_it_dies() -> None:
    held = reserve_port()
    port = held.getsockname()[1]
    try:
        assert _refused(port)  # loading: nothing listens yet
        for _restart in range(2):  # the first start, then a restart after a crash
            server = _listen(port)
            client = socket.create_connection(("127.0.0.1", port), timeout=2)
            conn, _ = server.accept()
            conn.close()
            client.close()
            server.close()  # the process died
            assert _refused(port)
    finally:
        held.close()


def test_nobody_else_gets_a_held_port() -> None:
    held = reserve_port()
    port = held.getsockname()[1]
    try:
        plain = socket.socket()
        with pytest.raises(OSError):
            plain.bind(("127.0.0.1", port))
        plain.close()
        # Another pod's reservation, and any bind to port 0, gets another port (bounded sample).
        others = [reserve_port() for _ in range(200)]
        try:
            assert port not in {o.getsockname()[1] for o in others}
        finally:
            for o in others:
                o.close()
    finally:
        held.close()
    again = socket.socket()
    again.bind(("127.0.0.1", port))  # released: free for the next pod
    again.close()
