"""`drctl codec-server`: the Temporal UI's remote codec endpoint, decrypting for those allowed.

The UI (and `temporal workflow show --codec-endpoint`) POSTs `{"payloads": [...]}` (payloads in
protobuf JSON form) to /decode or /encode, from the browser: so CORS answers the UI's origin only,
including the preflight OPTIONS that names the `X-Namespace` header. With a bearer token
configured, /encode and /decode refuse any request without it; the preflight never carries it.
The standard library's threading HTTP server is enough here, and keeps the worker image lean.
"""

from __future__ import annotations

import hmac
import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload

from drctl.client.codec import AesGcmCodec

log = logging.getLogger("drctl.codec_server")
_MAX_BODY = 4 * 1024 * 1024  # the UI decodes one history page at a time
_ALLOW_HEADERS = "Content-Type, X-Namespace, Authorization"
_PATHS = ("/encode", "/decode")


class CodecServer:
    def __init__(self, codec: AesGcmCodec, origins: list[str], token: str | None = None) -> None:
        self.codec, self.origins, self.token = codec, {o.rstrip("/") for o in origins}, token

    def authorised(self, header: str | None) -> bool:
        if not self.token:
            return True
        return hmac.compare_digest((header or "").encode(), f"Bearer {self.token}".encode())

    def transform(self, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """(status, JSON answer) for a POST to /encode or /decode."""
        try:
            payloads = [json_format.ParseDict(p, Payload()) for p in json.loads(body)["payloads"]]
        except (ValueError, KeyError, TypeError, json_format.ParseError) as exc:
            return 400, {"message": f'expected {{"payloads": [...]}}: {exc}'}
        try:
            out = [self.codec.encrypt(p) if path == "/encode" else self.codec.decrypt(p) for p in payloads]
        except Exception as exc:  # noqa: BLE001 - a bad ciphertext or unknown key is the caller's to see
            return 400, {"message": f"cannot {path.strip('/')}: {exc}"}
        return 200, {"payloads": [json_format.MessageToDict(p) for p in out]}

    def serve(self, host: str, port: int) -> ThreadingHTTPServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
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
                if not server.authorised(self.headers.get("Authorization")):
                    return self._answer(401, {"message": "missing or wrong bearer token"})
                length = int(self.headers.get("Content-Length") or 0)
                if length > _MAX_BODY:
                    return self._answer(413, {"message": f"body over {_MAX_BODY} bytes"})
                status, body = server.transform(self.path, self.rfile.read(length))
                if status != 200:
                    log.warning(
                        "codec %s for namespace %s: %s", self.path, self.headers.get("X-Namespace"), body
                    )
                self._answer(status, body)

            def log_message(self, fmt: str, *args: Any) -> None:
                log.debug(fmt, *args)

        return ThreadingHTTPServer((host, port), Handler)
