"""The HAProxy runtime socket gone, silent, or answering garbage.

A real unix-socket server stands in for a broken HAProxy: it accepts, reads the command line and
answers with whatever the test gives it (or nothing). Each failure must come out as one clear error
that names the socket, classified so Temporal retries what can heal.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.errors import app_error
from drctl.providers.errors import classify
from drctl.providers.haproxy import HAProxyGlobalTraffic
from drctl.providers.haproxy_runtime import HAProxyBadReply, HAProxyError, HAProxyRuntime
from tests.support.haproxy_socket import FakeSocket


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[list[FakeSocket]]:
    made: list[FakeSocket] = []
    yield made
    for f in made:
        f.close()


def test_missing_socket_is_retryable_and_names_the_path(tmp_path: Path) -> None:
    path = str(tmp_path / "gone.sock")
    with pytest.raises(HAProxyError) as err:
        HAProxyGlobalTraffic(HAProxyRuntime(path, timeout_s=0.5), "global", ["us-west-1"]).get_weights()
    e = classify(err.value, "read global weights")
    assert (e.kind, e.retryable) == ("Unavailable", True)
    assert (
        path in e.message and "unreachable" in e.message and e.message.startswith("Unavailable: read global")
    )
    app = app_error(err.value, "read global weights")
    assert app.type == "Unavailable" and not app.non_retryable


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 400 Bad Request\r\n\r\n",  # something else listens on the socket
        b"\x00\xff\xfe garbage",
        b"1\n# be_id be_name",  # a reply cut short mid-way (HAProxy reloading)
    ],
)
def test_garbage_reply_is_a_clear_bad_reply(tmp_path: Path, fake: list[FakeSocket], reply: bytes) -> None:
    srv = FakeSocket(tmp_path / "garbage.sock", reply)
    fake.append(srv)
    rt = HAProxyRuntime(srv.path, timeout_s=2)
    with pytest.raises(HAProxyBadReply) as err:
        rt.get_weights("global")
    assert srv.received and srv.received[0] == b"show servers state global\n"
    e = classify(err.value, "read global weights")
    assert (e.kind, e.retryable) == ("HAProxyBadReply", True)
    assert srv.path in e.message and "cannot be parsed" in e.message and "effect is unknown" in e.message
    # Never taken for an empty backend: a write based on it would be a silent wrong answer.
    with pytest.raises(HAProxyBadReply):
        rt.set_weights("global", {"us-west-1": 10})


def test_unparsable_servers_state_names_the_socket(tmp_path: Path, fake: list[FakeSocket]) -> None:
    # The header of a state table, then a row that lacks its columns: a reply cut short.
    srv = FakeSocket(tmp_path / "odd.sock", b"1\n# be_id be_name srv_name srv_admin_state\n1 global\n\n")
    fake.append(srv)
    with pytest.raises(HAProxyBadReply) as err:
        HAProxyRuntime(srv.path, timeout_s=2).servers("global")
    assert srv.path in str(err.value) and "show servers state" in str(err.value)
    assert classify(err.value).retryable


def test_silent_socket_times_out_retryable(tmp_path: Path, fake: list[FakeSocket]) -> None:
    srv = FakeSocket(tmp_path / "silent.sock", None)
    fake.append(srv)
    with pytest.raises(HAProxyError) as err:
        HAProxyRuntime(srv.path, timeout_s=0.3).command("show info")
    e = classify(err.value)
    assert (e.kind, e.retryable) == ("Unavailable", True)
    assert srv.path in e.message and "did not answer within 0.3s" in e.message
