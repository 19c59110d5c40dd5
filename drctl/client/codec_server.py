"""`drctl codec-server`: the Temporal UI's remote codec endpoint, decrypting for those allowed.

The UI (and `temporal workflow show --codec-endpoint`) POSTs `{"payloads": [...]}` (payloads in
protobuf JSON form) to /decode or /encode, from the browser: so CORS answers the UI's origin only,
including the preflight OPTIONS that names the `X-Namespace` header. The standard library's
threading HTTP server is enough here, and keeps the worker image lean.

It decrypts history, so every request is checked before its body is read:
- a bearer token is required on /encode and /decode (the preflight never carries it); running
  without one needs `--insecure-no-auth` and a loopback address (drctl/cli/codec.py);
- the Host header must be one of the allowed hosts (a DNS-rebinding page reaches a loopback server
  under its own host name), and an Origin header, when sent, one of the allowed origins;
- the body must have a Content-Length of at most 4 MiB: missing, malformed, negative or chunked
  bodies are refused.

Ciphertext is bound to its namespace, so each request names one: the UI and the Temporal CLI send
`X-Namespace`, and the codec-server protocol (temporalio/samples-go codec-server/protocol.md) also
allows a namespace in the URL (`/{namespace}/decode`), the form the CLI's `--codec-endpoint`
templating produces. The protocol makes both optional, so a request that names none is answered
for the fleet config's `temporal.namespace`; one naming any other namespace is refused (403), and
one whose header and URL disagree is malformed (400). Nothing else is ever used silently.
"""

from __future__ import annotations

import hmac
import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload

from drctl.client.codec import ENCODING, AesGcmCodec

log = logging.getLogger("drctl.codec_server")
MAX_BODY = 4 * 1024 * 1024  # the UI decodes one history page at a time
_ALLOW_HEADERS = "Content-Type, X-Namespace, Authorization"
_OPS = ("encode", "decode")


def route(path: str) -> tuple[str, str | None] | None:
    """(operation, the namespace the URL names or None) for /encode, /decode, /{ns}/encode, /{ns}/decode."""
    parts = path.split("?", 1)[0].split("/")
    if len(parts) == 2 and parts[0] == "" and parts[1] in _OPS:
        return parts[1], None
    if len(parts) == 3 and parts[0] == "" and parts[2] in _OPS and parts[1]:
        return parts[2], unquote(parts[1])
    return None


class CodecServer:
    def __init__(self, codec: AesGcmCodec, origins: list[str], token: str | None, hosts: list[str]) -> None:
        """`codec.namespace` is the fleet config's Temporal namespace: the one namespace served."""
        self.codec, self.origins, self.token = codec, {o.rstrip("/") for o in origins}, token
        self.hosts = {h.lower() for h in hosts}

    def authorised(self, header: str | None) -> bool:
        if not self.token:
            return True  # only with --insecure-no-auth, on loopback (checked by the CLI)
        return hmac.compare_digest((header or "").encode(), f"Bearer {self.token}".encode())

    def refusal(self, headers: Any, needs_auth: bool) -> tuple[int, str] | None:
        """Why a request is refused before its body is read, or None."""
        if (headers.get("Host") or "").lower() not in self.hosts:
            return 421, "Host is not one this codec server answers for"
        origin = headers.get("Origin")
        if origin is not None and origin.rstrip("/") not in self.origins:
            return 403, "Origin is not allowed"
        if needs_auth and not self.authorised(headers.get("Authorization")):
            return 401, "missing or wrong bearer token"
        return None

    def namespace(self, headers: Any, in_path: str | None) -> str | tuple[int, str]:
        """The namespace a request is answered for, or (status, why) when it is refused."""
        given = headers.get_all("X-Namespace") or []
        if len(given) > 1:
            return 400, "send at most one X-Namespace header"
        header = given[0] if given else None
        if header is not None and in_path is not None and header != in_path:
            return 400, "X-Namespace and the URL name different namespaces"
        asked = header if header is not None else in_path
        if asked is None:
            return self.codec.namespace  # neither sent: the fleet config's namespace, per the protocol
        if asked != self.codec.namespace:
            # Not echoed: the header is the caller's text.
            return 403, "this codec server serves only the fleet config's temporal.namespace"
        return asked

    def transform(self, op: str, body: bytes, ns: str) -> tuple[int, dict[str, Any]]:
        """(status, JSON answer) for a POST to /encode or /decode, for namespace `ns`."""
        try:
            payloads = [json_format.ParseDict(p, Payload()) for p in json.loads(body)["payloads"]]
        except (ValueError, KeyError, TypeError, json_format.ParseError, RecursionError):
            return 400, {"message": 'expected {"payloads": [...]} of Temporal payloads'}
        try:
            if op == "encode":
                out = [self.codec.encrypt(p, ns) for p in payloads]
            else:
                # The UI shows histories written before the codec too: plaintext passes through here.
                out = [
                    p if p.metadata.get("encoding") != ENCODING else self.codec.decrypt(p, ns)
                    for p in payloads
                ]
        except Exception as exc:  # noqa: BLE001 - a bad ciphertext or unknown key is the caller's to see
            return 400, {"message": f"cannot {op}: {exc}"}
        return 200, {"payloads": [json_format.MessageToDict(p) for p in out]}

    def serve(self, host: str, port: int) -> ThreadingHTTPServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 30  # a client that stops sending mid-request gives its thread back

            def _cors(self) -> None:
                origin = (self.headers.get("Origin") or "").rstrip("/")
                if origin in server.origins:
                    self.send_header("Access-Control-Allow-Origin", origin)
                    self.send_header("Access-Control-Allow-Credentials", "true")
                    self.send_header("Vary", "Origin")

            def _answer(self, status: int, body: dict[str, Any] | None = None, **headers: str) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(status)
                self._cors()
                for k, v in headers.items():
                    self.send_header(k.replace("_", "-"), v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_OPTIONS(self) -> None:  # noqa: N802 - http.server's naming
                if route(self.path) is None:
                    return self._answer(404, {"message": "not found"})
                refused = server.refusal(self.headers, needs_auth=False)
                if refused:
                    return self._answer(refused[0], {"message": refused[1]})
                self._answer(
                    200,
                    None,
                    Access_Control_Allow_Methods="POST, OPTIONS",
                    Access_Control_Allow_Headers=_ALLOW_HEADERS,
                    Access_Control_Max_Age="600",
                )

            def do_POST(self) -> None:  # noqa: N802
                routed = route(self.path)
                if routed is None:
                    return self._answer(404, {"message": "not found"})
                ns = server.refusal(self.headers, needs_auth=True) or server.namespace(
                    self.headers, routed[1]
                )
                if isinstance(ns, tuple):
                    self.close_connection = True
                    return self._answer(ns[0], {"message": ns[1]})
                length = content_length(self.headers)
                if isinstance(length, tuple):
                    self.close_connection = True  # the unread body must not be taken for a request
                    return self._answer(length[0], {"message": length[1]})
                status, body = server.transform(routed[0], self.rfile.read(length), ns)
                if status != 200:
                    log.warning("codec %s for namespace %r refused: %s", routed[0], ns[:64], status)
                self._answer(status, body)

            def log_message(self, fmt: str, *args: Any) -> None:
                log.debug(fmt, *args)

        return _Server((host, port), Handler)


class _Server(ThreadingHTTPServer):
    # http.server's backlog is 5: a Temporal UI opening a namespace's histories sends a burst of
    # decodes, and connects past the fifth wait for SYN retransmits. uvicorn's default depth.
    request_queue_size = 2048


def content_length(headers: Any) -> tuple[int, str] | int:
    """The body's length, or (status, why) for a body the server will not read."""
    if headers.get("Transfer-Encoding"):
        return 411, "chunked bodies are not accepted: send Content-Length"
    raw = headers.get_all("Content-Length") or []
    if len(raw) != 1:
        return 411, "exactly one Content-Length is required"
    value = raw[0].strip()
    if not value.isdigit() or len(value) > 12:
        return 400, "Content-Length must be a non-negative integer"
    if int(value) > MAX_BODY:
        return 413, f"body over {MAX_BODY} bytes"
    return int(value)
