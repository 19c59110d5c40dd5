"""processes.port_holder names the process listening on a port, for "port taken" errors."""

from __future__ import annotations

import os
import socket

from drctl.devstack import processes


def test_names_the_listening_process() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert processes.port_holder(port).startswith(f" (pid {os.getpid()}: ")


def test_a_bound_but_not_listening_socket_and_a_free_port_name_nobody() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        assert processes.port_holder(port) == ""
    assert processes.port_holder(port) == ""
