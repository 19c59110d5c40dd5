"""The runtime client against recorded CLI transcripts of each supported HAProxy release.

haproxy-2.6 and haproxy-3.2 were recorded from real binaries (Debian's, and the 3.2.0 build in
../shared/tools); 2.8 and 3.0 are derived from the upstream source at their tags (each file's
`source` says how). tests/providers/transcripts/record.py makes them. A replayed socket answers
each command line with its recorded reply and closes, as HAProxy does in non-interactive mode, so
every call here is checked against what that release prints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from drctl.providers.gateway_stats import gateway_snapshots
from drctl.providers.haproxy_runtime import HAProxyBadReply, HAProxyError, HAProxyRuntime
from tests.support.haproxy_socket import FakeSocket, Transcript

VERSIONS = ["2.6", "2.8", "3.0", "3.2"]


@pytest.fixture(params=VERSIONS)
def replay(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[HAProxyRuntime, Transcript]]:
    transcript = Transcript(request.param)
    srv = FakeSocket(tmp_path / "admin.sock", transcript)
    yield HAProxyRuntime(srv.path, timeout_s=2), transcript
    srv.close()
    # Every line the client sent was one command the release was recorded answering.
    assert transcript.unknown == []
    assert all(b";" not in line for line in srv.received)


def test_transcripts_name_their_source() -> None:
    for version in VERSIONS:
        doc = Transcript(version).doc
        assert doc["haproxy"].startswith(f"HAProxy version {version}."), doc["haproxy"]
        how = "recorded from the real binary" if version in ("2.6", "3.2") else "derived from the upstream"
        assert doc["source"].startswith(how)


def test_weights_read_set_and_read_back(replay: tuple[HAProxyRuntime, Transcript]) -> None:
    rt, _ = replay
    servers = {s.name: s for s in rt.servers("global")}
    assert {n: (s.weight, s.initial_weight) for n, s in servers.items()} == {
        "us-west-1": (60, 60),
        "us-east-1": (40, 40),
    }
    assert servers["us-west-1"].address == "127.0.0.1" and servers["us-west-1"].port == 1
    assert rt.command("get weight global/us-west-1") == "60 (initial 60)"
    rt.set_weights("global", {"us-west-1": 10})
    assert rt.get_weights("global") == {"us-west-1": 10, "us-east-1": 40}


def test_refusals_are_errors_with_haproxy_text(replay: tuple[HAProxyRuntime, Transcript]) -> None:
    rt, _ = replay
    with pytest.raises(HAProxyError) as err:
        rt.command("set weight global/nope 1")
    assert err.value.reply == "No such server." and not isinstance(err.value, HAProxyBadReply)
    with pytest.raises(HAProxyError, match="static LB algorithm"):
        rt.command("set weight hashed/b 50")
    with pytest.raises(HAProxyError, match="Can't find backend"):
        rt.servers("nope")
    with pytest.raises(HAProxyError, match="Unknown command"):
        rt.command("frobnicate all")


def test_dynamic_server_lifecycle(replay: tuple[HAProxyRuntime, Transcript]) -> None:
    rt, _ = replay
    rt.add_server("track_stable", "r1", "127.0.0.1", 1, inter_ms=1000, fall=2, rise=1)
    (r1,) = rt.servers("track_stable")
    assert (r1.name, r1.admin_maint) == ("r1", False)
    with pytest.raises(HAProxyError, match="Already exists"):
        rt.add_server("track_stable", "r1", "127.0.0.1", 1, inter_ms=1000, fall=2, rise=1)
    rt.del_server("track_stable", "r1")
    with pytest.raises(HAProxyError, match="No such server"):
        rt.command("del server track_stable/r1")
    rt.commands(["clear acl {acl}", "add acl {acl} 192.0.2.7"])


def test_show_stat_fields(replay: tuple[HAProxyRuntime, Transcript]) -> None:
    rt, _ = replay
    (snap,) = gateway_snapshots(rt, "us-west-1", ["global"], clock=lambda: 5.0)
    assert (snap.requests_total, snap.errors_total, snap.queue, snap.connect_errors_total) == (0, 0, 0, 0)
    assert snap.response_time_avg_ms is None  # no request yet: no mean, not a fast one


def test_pipelined_separator_is_what_the_client_avoids() -> None:
    """Why the client sends one command per connection: the separator changed in 3.2.0."""
    for version in VERSIONS:
        reply = Transcript(version).doc["pipelined"]["reply"]
        if version == "3.2":
            assert reply == "\n10 (initial 60)\n\n40 (initial 40)\n\n"
        else:
            assert reply == "\n> 10 (initial 60)\n\n> 40 (initial 40)\n\n> "


def _odd_set_weight(transcript: Transcript, reply: bytes) -> Callable[[str], bytes]:
    def answer(line: str) -> bytes:
        return reply if line.startswith("set weight ") else transcript(line)

    return answer


@pytest.mark.parametrize("odd", [b"", b"Weight changed, or so.\n", b"No such"])
def test_unparsable_set_weight_reply_is_settled_by_reading_back(tmp_path: Path, odd: bytes) -> None:
    # The recorded read-back shows us-west-1 at 10: asked 10, the change is known to be in place.
    transcript = Transcript("3.2")
    srv = FakeSocket(tmp_path / "a.sock", _odd_set_weight(transcript, odd))
    try:
        rt = HAProxyRuntime(srv.path, timeout_s=2)
        rt.set_weights("global", {"us-west-1": 10})
        # Asked 20, read back 10: neither applied nor refused can be assumed, and the error says so.
        with pytest.raises(HAProxyBadReply) as err:
            rt.set_weights("global", {"us-west-1": 20})
        msg = str(err.value)
        assert "effect is unknown" in msg and "read back" in msg and "'us-west-1': 10" in msg
    finally:
        srv.close()


def test_unparsable_reply_with_unreadable_weights(tmp_path: Path) -> None:
    transcript = Transcript("2.6")
    calls: list[str] = []

    def answer(line: str) -> bytes:
        calls.append(line)
        if line.startswith("set weight "):
            return b"?"
        # The first read (before the change) works; the read-back is cut short.
        return transcript(line) if calls.count(line) == 1 else b"1\n# be_id"

    srv = FakeSocket(tmp_path / "a.sock", answer)
    try:
        with pytest.raises(HAProxyBadReply, match="effect is unknown.*reading the weights back failed too"):
            HAProxyRuntime(srv.path, timeout_s=2).set_weights("global", {"us-west-1": 10})
        assert calls == [
            "show servers state global",
            "set weight global/us-west-1 10",
            "show servers state global",
        ]
    finally:
        srv.close()


@pytest.mark.parametrize("registered", [True, False])
def test_unparsable_add_server_reply_is_settled_by_looking_for_the_server(
    tmp_path: Path, registered: bool
) -> None:
    transcript = Transcript("3.2")

    def answer(line: str) -> bytes:
        if line.startswith("add server "):
            return b"New server"  # cut short: was it registered?
        reply = transcript(line)
        if line == "show servers state track_stable" and not registered:
            return b"\n".join(reply.split(b"\n")[:2]) + b"\n\n"  # the header, no server
        return reply

    srv = FakeSocket(tmp_path / "a.sock", answer)
    try:
        rt = HAProxyRuntime(srv.path, timeout_s=2)
        if registered:
            rt.add_server("track_stable", "r1", "127.0.0.1", 1, inter_ms=1000, fall=2, rise=1)
            assert [r.name for r in rt.servers("track_stable")] == ["r1"]
        else:
            with pytest.raises(HAProxyBadReply, match="effect is unknown"):
                rt.add_server("track_stable", "r1", "127.0.0.1", 1, inter_ms=1000, fall=2, rise=1)
        # Put in service only when it is known to be there.
        assert (b"set server track_stable/r1 state ready\n" in srv.received) is registered
    finally:
        srv.close()
