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
Payloads are decrypted for the namespace the UI names in X-Namespace (ciphertext is bound to it).
"""

from __future__ import annotations

import hmac
import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload

from drctl.client.codec import ENCODING, AesGcmCodec

log = logging.getLogger("drctl.codec_server")
MAX_BODY = 4 * 1024 * 1024  # the UI decodes one history page at a time
_ALLOW_HEADERS = "Content-Type, X-Namespace, Authorization"
_PATHS = ("/encode", "/decode")


class CodecServer:
    def __init__(self, codec: AesGcmCodec, origins: list[str], token: str | None, hosts: list[str]) -> None:
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

    def transform(self, path: str, body: bytes, namespace: str | None) -> tuple[int, dict[str, Any]]:
        """(status, JSON answer) for a POST to /encode or /decode."""
        try:
            payloads = [json_format.ParseDict(p, Payload()) for p in json.loads(body)["payloads"]]
        except (ValueError, KeyError, TypeError, json_format.ParseError, RecursionError):
            return 400, {"message": 'expected {"payloads": [...]} of Temporal payloads'}
        ns = namespace or self.codec.namespace
        try:
            if path == "/encode":
                out = [self.codec.encrypt(p, ns) for p in payloads]
            else:
                # The UI shows histories written before the codec too: plaintext passes through here.
                out = [
                    p if p.metadata.get("encoding") != ENCODING else self.codec.decrypt(p, ns)
                    for p in payloads
                ]
        except Exception as exc:  # noqa: BLE001 - a bad ciphertext or unknown key is the caller's to see
            return 400, {"message": f"cannot {path.strip('/')}: {exc}"}
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
                if self.path not in _PATHS:
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
                if self.path not in _PATHS:
                    return self._answer(404, {"message": "not found"})
                refused = server.refusal(self.headers, needs_auth=True)
                if refused:
                    self.close_connection = True
                    return self._answer(refused[0], {"message": refused[1]})
                length = content_length(self.headers)
                if isinstance(length, tuple):
                    self.close_connection = True  # the unread body must not be taken for a request
                    return self._answer(length[0], {"message": length[1]})
                namespace = self.headers.get("X-Namespace")
                status, body = server.transform(self.path, self.rfile.read(length), namespace)
                if status != 200:
                    # repr and cut: the namespace header is the caller's text; never the payloads.
                    log.warning(
                        "codec %s for namespace %r refused: %s", self.path, (namespace or "")[:64], status
                    )
                self._answer(status, body)

            def log_message(self, fmt: str, *args: Any) -> None:
                log.debug(fmt, *args)

        return ThreadingHTTPServer((host, port), Handler)


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
