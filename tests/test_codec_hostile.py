"""The codec against hostile input: no key material in any error, no plaintext, no replay into another
namespace, and a codec server that refuses unauthenticated, cross-site and oversized requests."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload

from drctl.client.codec import AesGcmCodec, CodecKeyError, PlaintextRefused, load_keys, parse_keys
from drctl.client.codec_server import MAX_BODY, CodecServer
from drctl.client.plaintext import PayloadRefused, codec_data_converter
from drctl.config.schema import CodecConfig
from tests.support.cli import run_cli
from tests.support.config import fleet_config_data
from tests.support.ports import free_port, listening
from tests.support.wait import wait_until

BIN = Path(sys.executable).parent

KEY = base64.b64encode(b"K" * 16 + b"e" * 16).decode()  # 32 bytes; its text must never be shown
OTHER = base64.b64encode(b"o" * 32).decode()
MISTAKES = [
    KEY,  # the id forgotten
    f"{KEY}=k1",  # id and key swapped
    f"k1:{KEY}",  # the wrong separator
    f"k1 = {KEY[:-4]}",  # a truncated key
    f"k 1={KEY}",  # a space in the id
    f'"k1={KEY}"',  # quoted
    json.dumps({"k1": KEY}),  # JSON instead of id=key
    f"k1={KEY};k2={OTHER}",  # the wrong list separator
    f"k1={KEY}\nk1={OTHER}",  # the same id twice
    f"k1={KEY}{KEY}",  # two keys run together
    f"{KEY[:10]}={KEY[10:]}",  # a split that looks like an entry
    f"k1=\u00e9{KEY}",  # a non-ASCII character
]


def _windows(secret: str, n: int = 8) -> set[str]:
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


@pytest.mark.parametrize("text", MISTAKES, ids=range(len(MISTAKES)))
def test_no_format_mistake_shows_key_material(text: str) -> None:
    with pytest.raises(CodecKeyError) as err:
        parse_keys(text, "environment variable DRCTL_CODEC_KEYS")
    message = str(err.value)
    assert "DRCTL_CODEC_KEYS" in message and "entry" in message or "no keys" in message, message
    assert not any(w in message for w in _windows(KEY) | _windows(OTHER)), message


def test_the_cli_names_the_mistake_without_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = fleet_config_data()
    data["temporal"]["codec"] = {"keys_env": "DRCTL_CODEC_KEYS"}
    cfg = tmp_path / "fleet.yaml"
    cfg.write_text(yaml.safe_dump(data))
    for text in MISTAKES[:4]:
        monkeypatch.setenv("DRCTL_CODEC_KEYS", text)
        for argv in (
            ["codec-server", "-c", str(cfg), "--insecure-no-auth"],
            ["failover", "--to", "us-east-1", "--yes", "-c", str(cfg)],
        ):
            code, out, err = run_cli(argv)
            assert code == 2 and "DRCTL_CODEC_KEYS" in err, (argv, code, err)
            assert not any(w in out + err for w in _windows(KEY)), err


def _codec(namespace: str = "prod", allow_plaintext: bool = False) -> AesGcmCodec:
    return AesGcmCodec(parse_keys(f"k1={KEY}", "test"), namespace, allow_plaintext=allow_plaintext)


def test_plaintext_is_refused_unless_a_migration_window_allows_it() -> None:
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'{"image": "x"}')
    with pytest.raises(PlaintextRefused, match="plaintext payload refused"):
        _codec().decrypt(plain)
    # decode hands it on marked, without its bytes; converting the mark raises the non-retryable
    # error that fails whatever it reached (tests/test_codec_plaintext.py, on a real server).
    (mark,) = asyncio.run(_codec().decode([plain]))
    assert mark.metadata["encoding"] == b"binary/drctl-refused" and mark.data == b""
    converter = codec_data_converter(_codec())
    with pytest.raises(PayloadRefused, match="plaintext payload refused") as err:
        asyncio.run(converter.decode([plain]))
    assert err.value.non_retryable and err.value.type == "PlaintextRefused"
    assert "allow_plaintext" in str(err.value)
    assert asyncio.run(_codec(allow_plaintext=True).decode([plain])) == [plain]


def test_ciphertext_is_bound_to_its_namespace() -> None:
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'"secret"')
    sealed = _codec("prod").encrypt(plain)
    assert _codec("prod").decrypt(sealed) == plain
    with pytest.raises(CodecKeyError, match="another namespace"):
        _codec("staging").decrypt(sealed)
    # Dropping the binding marker does not downgrade it to the unbound form.
    stripped = Payload(metadata={k: v for k, v in sealed.metadata.items() if k != "encryption-binding"})
    stripped.data = sealed.data
    with pytest.raises(PlaintextRefused):
        _codec("prod").decrypt(stripped)
    with pytest.raises(CodecKeyError, match="another namespace"):
        _codec("prod", allow_plaintext=True).decrypt(stripped)


UI = "http://127.0.0.1:8233"
TOKEN = "codec-ui-token"


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[int, AesGcmCodec]]:
    codec = _codec("default")
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    httpd = CodecServer(codec, [UI], TOKEN, [f"127.0.0.1:{port}"]).serve("127.0.0.1", port)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield port, codec
    httpd.shutdown()
    httpd.server_close()


def _raw(port: int, head: str, body: bytes = b"") -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        s.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
            if len(data) > 1 << 20:
                break
    return int(data.split(b" ", 2)[1]), data


def _post(port: int, body: bytes, path: str = "/decode", **headers: str) -> tuple[int, bytes]:
    """POST `body`; a header given as "" is left out, except X-Namespace, which is sent empty."""
    base = {"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {TOKEN}", "Content-Length": str(len(body))}
    base.update({k.replace("_", "-"): v for k, v in headers.items()})
    lines = "".join(f"{k}: {v}\n" for k, v in base.items() if v != "" or k == "X-Namespace")
    return _raw(port, f"POST {path} HTTP/1.1\n{lines}", body)


def test_codec_server_decodes_for_the_authenticated_caller(server: tuple[int, AesGcmCodec]) -> None:
    port, codec = server
    sealed = codec.encrypt(Payload(metadata={"encoding": b"json/plain"}, data=b'"hello"'))
    body = json.dumps({"payloads": [json_format.MessageToDict(sealed)]}).encode()
    status, data = _post(port, body, Origin=UI, X_Namespace="default")
    assert status == 200 and base64.b64encode(b'"hello"') in data, data
    # The URL form of the protocol (`/{namespace}/decode`), and no namespace at all: the configured one.
    none: dict[str, str] = {}
    for path, headers in (("/default/decode", none), ("/decode", none)):
        status, data = _post(port, body, path=path, **headers)
        assert status == 200 and base64.b64encode(b'"hello"') in data, (path, data)
    # Another namespace is refused before anything is decrypted, named in the header or the URL.
    for path, headers in (
        ("/decode", {"X_Namespace": "other"}),
        ("/other/decode", none),
        ("/decode", {"X_Namespace": ""}),
    ):
        status, data = _post(port, body, path=path, **headers)
        assert status == 403 and b"temporal.namespace" in data and b"other" not in data, (path, data)
    status, data = _post(port, body, path="/default/decode", X_Namespace="other")
    assert status == 400 and b"different namespaces" in data, data
    for path in ("/a/b/decode", "/decode/x", "/decodex"):
        assert _post(port, body, path=path)[0] == 404, path


@pytest.mark.parametrize(
    "headers, status",
    [
        ({"Authorization": ""}, 401),
        ({"Authorization": "Bearer wrong"}, 401),
        ({"Authorization": f"Basic {TOKEN}"}, 401),
        ({"Origin": "http://evil.example"}, 403),
        ({"Host": "evil.example"}, 421),
        ({"Content-Length": str(MAX_BODY + 1)}, 413),
        ({"Content-Length": "-5"}, 400),
        ({"Content-Length": "12abc"}, 400),
        ({"Content-Length": "99999999999999999999"}, 400),
        ({"Content-Length": "\u00b2"}, 400),  # isdigit() is true of it, int() is not
        ({"Content-Length": "1, 1"}, 400),
        # Both framings at once is the request-smuggling shape: refused by the parser (RFC 9112 6.1).
        ({"Transfer-Encoding": "chunked"}, 400),
    ],
    ids=lambda v: str(v)[:30],
)
def test_codec_server_refuses_before_reading_the_body(
    server: tuple[int, AesGcmCodec], headers: dict[str, str], status: int
) -> None:
    port, _ = server
    got, data = _post(port, b'{"payloads": []}', **{k.replace("-", "_"): v for k, v in headers.items()})
    assert got == status, data
    assert KEY.encode() not in data and b"Traceback" not in data


@pytest.mark.parametrize(
    "headers, body",
    [
        ({"Content-Length": ""}, b""),  # no length and no body
        (
            {"Content-Length": "", "Transfer-Encoding": "chunked"},
            b"10\r\n" + b'{"payloads": []}' + b"\r\n0\r\n\r\n",
        ),
    ],
    ids=["no-length", "chunked"],
)
def test_codec_server_wants_a_content_length(
    server: tuple[int, AesGcmCodec], headers: dict[str, str], body: bytes
) -> None:
    port, _ = server
    got, data = _post(port, body, **{k.replace("-", "_"): v for k, v in headers.items()})
    assert got == 411, data


def test_a_request_never_finished_loses_its_connection() -> None:
    """A client sending its head slowly (slowloris) is closed at the idle timeout, slot given back."""
    port = free_port()
    httpd = CodecServer(_codec("default"), [UI], TOKEN, [f"127.0.0.1:{port}"]).serve("127.0.0.1", port)
    httpd.idle_timeout_s = 1.0
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"POST /decode HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            assert s.recv(64) == b""  # closed by the server, nothing answered
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_codec_server_caps_connections_before_authentication() -> None:
    """Connections past the cap are answered 503 at once, before any byte of theirs is read; the
    ones held open still count until they close, and then the server serves again."""
    port = free_port()
    httpd = CodecServer(_codec("default"), [UI], TOKEN, [f"127.0.0.1:{port}"]).serve("127.0.0.1", port)
    httpd.max_connections = 4
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(4)]
        for s in held:
            s.sendall(b"POST /decode HTTP/1.1\r\n")  # a request begun, never finished

        def busy() -> bool:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                return s.recv(64).startswith(b"HTTP/1.1 503 ")  # answered without sending a byte

        wait_until(busy, timeout_s=30, what="the fifth connection refused")
        for s in held:
            s.close()

        def served() -> bool:
            try:
                return _post(port, b'{"payloads": []}')[0] == 200
            except OSError:  # refused at the cap while the held ones are still being closed
                return False

        wait_until(served, timeout_s=30, what="served again once the held connections closed")
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_codec_server_needs_auth_unless_told_otherwise_on_loopback(tmp_path: Path) -> None:
    data = fleet_config_data()
    data["temporal"]["codec"] = {"keys_env": "DRCTL_CODEC_KEYS"}
    cfg = tmp_path / "fleet.yaml"
    cfg.write_text(yaml.safe_dump(data))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DRCTL_CODEC_KEYS", f"k1={KEY}")
        code, _, err = run_cli(["codec-server", "-c", str(cfg)])
        assert code == 2 and "--token-env" in err, err
        code, _, err = run_cli(["codec-server", "-c", str(cfg), "--insecure-no-auth", "--host", "0.0.0.0"])
        assert code == 2 and "loopback" in err, err
        mp.delenv("DRCTL_CODEC_TOKEN", raising=False)
        code, _, err = run_cli(["codec-server", "-c", str(cfg), "--token-env", "DRCTL_CODEC_TOKEN"])
        assert code == 2 and "DRCTL_CODEC_TOKEN is unset or empty" in err, err


def test_the_cli_serves_the_fleet_configs_namespace_and_refuses_others(tmp_path: Path) -> None:
    """`drctl codec-server` binds to temporal.namespace: a request naming no namespace is answered for
    it (not for "default"), and ciphertext of another namespace is refused, not decrypted."""
    data = fleet_config_data()
    data["temporal"].update(namespace="prod", codec={"keys_env": "DRCTL_CODEC_KEYS"})
    cfg = tmp_path / "fleet.yaml"
    cfg.write_text(yaml.safe_dump(data))
    port = free_port()
    server = subprocess.Popen(
        [str(BIN / "drctl"), "codec-server", "-c", str(cfg), "--port", str(port), "--insecure-no-auth"],
        env={**os.environ, "DRCTL_CODEC_KEYS": f"k1={KEY}"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: listening(port), timeout_s=60, what="codec server up")
        plain = Payload(metadata={"encoding": b"json/plain"}, data=b'"hello"')

        def body(namespace: str) -> bytes:
            sealed = _codec(namespace).encrypt(plain)
            return json.dumps({"payloads": [json_format.MessageToDict(sealed)]}).encode()

        status, answer = _post(port, body("prod"), Authorization="")
        assert status == 200 and base64.b64encode(b'"hello"') in answer, answer
        status, answer = _post(port, body("default"), Authorization="", X_Namespace="default")
        assert status == 403, answer
        status, answer = _post(port, body("default"), Authorization="")
        assert status == 400 and b"another namespace" in answer, answer
    finally:
        server.terminate()
        server.wait(20)


def test_the_codec_server_refuses_a_keys_file_or_tls_ca_that_never_ends(tmp_path: Path) -> None:
    """A FIFO would block the read for good: refused at once, naming the setting, with exit 2, by
    the one bounded reader (drctl/config/bounded_read.py)."""
    odd = tmp_path / "pipe"
    os.mkfifo(odd)
    keys = tmp_path / "keys"
    keys.write_text(f"k1={KEY}\n")
    for setting, temporal in (
        ("temporal.codec.keys_file", {"codec": {"keys_file": str(odd)}}),
        (
            "temporal.tls.server_root_ca_cert_path",
            {"codec": {"keys_file": str(keys)}, "tls": {"server_root_ca_cert_path": str(odd)}},
        ),
    ):
        data = fleet_config_data()
        data["temporal"].update(temporal)
        cfg = tmp_path / "fleet.yaml"
        cfg.write_text(yaml.safe_dump(data))
        code, _, err = run_cli(["codec-server", "-c", str(cfg), "--insecure-no-auth"])
        assert code == 2 and setting in err and "not a regular file" in err, (setting, code, err)


def test_a_keys_file_that_is_a_device_is_refused_not_read() -> None:
    """/dev/zero never ends (the config's secret-path rule refuses it first; the reader holds anyway)."""
    with pytest.raises(CodecKeyError, match="temporal.codec.keys_file /dev/zero: a character device"):
        load_keys(CodecConfig(keys_file="/dev/zero"))
