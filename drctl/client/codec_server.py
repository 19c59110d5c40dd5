"""`drctl codec-server`: the Temporal UI's remote codec endpoint, decrypting for those allowed.

The UI (and `temporal workflow show --codec-endpoint`) POSTs `{"payloads": [...]}` (payloads in
protobuf JSON form) to /decode or /encode, from the browser: so CORS answers the UI's origin only,
including the preflight OPTIONS that names the `X-Namespace` header. It runs on aiohttp's server
(drctl/client/codec_http.py), which parses HTTP strictly and caps connections before any request
is read.

It decrypts history, so every request is checked before its body is read:
- a bearer token is required on /encode and /decode (the preflight never carries it); running
  without one needs `--insecure-no-auth` and a loopback address (drctl/cli/codec.py);
- the Host header must be one of the allowed hosts (a DNS-rebinding page reaches a loopback server
  under its own host name), and an Origin header, when sent, one of the allowed origins;
- the body must have a Content-Length of at most 4 MiB: missing, malformed, negative or chunked
  bodies are refused (a malformed one, e.g. `Content-Length: ²`, is a 400 from the parser).

Ciphertext is bound to its namespace, so each request names one: the UI and the Temporal CLI send
`X-Namespace`, and the codec-server protocol (temporalio/samples-go codec-server/protocol.md) also
allows a namespace in the URL (`/{namespace}/decode`), the form the CLI's `--codec-endpoint`
templating produces. The protocol makes both optional, so a request that names none is answered
for the fleet config's `temporal.namespace`; one naming any other namespace is refused (403), and
one whose header and URL disagree is malformed (400). Nothing else is ever used silently.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from typing import Any
from urllib.parse import unquote

from aiohttp import web
from google.protobuf import json_format
from multidict import CIMultiDictProxy
from temporalio.api.common.v1 import Payload

from drctl.client.codec import ENCODING, AesGcmCodec
from drctl.client.codec_http import CodecHTTPServer

log = logging.getLogger("drctl.codec_server")
MAX_BODY = 4 * 1024 * 1024  # the UI decodes one history page at a time
BODY_TIMEOUT_S = 30.0
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

    def refusal(self, headers: CIMultiDictProxy[str], needs_auth: bool) -> tuple[int, str] | None:
        """Why a request is refused before its body is read, or None."""
        if (headers.get("Host") or "").lower() not in self.hosts:
            return 421, "Host is not one this codec server answers for"
        origin = headers.get("Origin")
        if origin is not None and origin.rstrip("/") not in self.origins:
            return 403, "Origin is not allowed"
        if needs_auth and not self.authorised(headers.get("Authorization")):
            return 401, "missing or wrong bearer token"
        return None

    def namespace(self, headers: CIMultiDictProxy[str], in_path: str | None) -> str | tuple[int, str]:
        """The namespace a request is answered for, or (status, why) when it is refused."""
        given = headers.getall("X-Namespace", [])
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

    async def handle(self, request: web.BaseRequest) -> web.Response:
        """One request: refused before its body is read unless it is allowed, routed and sized."""
        routed = route(request.path)
        if routed is None:
            return self._answer(request, 404, {"message": "not found"})
        if request.method == "OPTIONS":
            refused = self.refusal(request.headers, needs_auth=False)
            if refused:
                return self._answer(request, *refused_body(refused))
            return self._answer(
                request,
                200,
                None,
                {
                    "Access-Control-Allow-Methods": "POST, OPTIONS",
                    "Access-Control-Allow-Headers": _ALLOW_HEADERS,
                    "Access-Control-Max-Age": "600",
                },
            )
        if request.method != "POST":
            return self._answer(request, 405, {"message": "POST or OPTIONS only"}, {"Allow": "POST, OPTIONS"})
        ns = self.refusal(request.headers, needs_auth=True) or self.namespace(request.headers, routed[1])
        if isinstance(ns, tuple):
            return self._answer(request, *refused_body(ns), close=True)
        length = content_length(request.headers)
        if isinstance(length, tuple):
            # The unread body must not be taken for the next request: the connection closes.
            return self._answer(request, *refused_body(length), close=True)
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):  # a caller that stops sending gives its slot back
                body = await request.content.readexactly(length)
        except asyncio.IncompleteReadError:
            return self._answer(
                request, 400, {"message": "the body is shorter than its Content-Length"}, close=True
            )
        except TimeoutError:
            why = f"body not received within {BODY_TIMEOUT_S:g}s"
            return self._answer(request, 408, {"message": why}, close=True)
        status, answer = self.transform(routed[0], body, ns)
        if status != 200:
            log.warning("codec %s for namespace %r refused: %s", routed[0], ns[:64], status)
        return self._answer(request, status, answer)

    def _answer(
        self,
        request: web.BaseRequest,
        status: int,
        body: dict[str, Any] | None,
        headers: dict[str, str] | None = None,
        *,
        close: bool = False,
    ) -> web.Response:
        out = dict(headers or {})
        origin = (request.headers.get("Origin") or "").rstrip("/")
        if origin in self.origins:
            out.update(
                {
                    "Access-Control-Allow-Origin": origin,
                    "Access-Control-Allow-Credentials": "true",
                    "Vary": "Origin",
                }
            )
        data = json.dumps(body).encode() if body is not None else b""
        resp = web.Response(status=status, body=data, headers=out, content_type="application/json")
        if close:
            resp.force_close()
        return resp

    def serve(self, host: str, port: int) -> CodecHTTPServer:
        """Listen on host:port now (a deep accept queue from the start); serve with `serve_forever`."""
        return CodecHTTPServer(self.handle, host, port)


def refused_body(refused: tuple[int, str]) -> tuple[int, dict[str, Any]]:
    return refused[0], {"message": refused[1]}


def content_length(headers: CIMultiDictProxy[str]) -> tuple[int, str] | int:
    """The body's length, or (status, why) for a body the server will not read."""
    if headers.get("Transfer-Encoding"):
        return 411, "chunked bodies are not accepted: send Content-Length"
    raw = headers.getall("Content-Length", [])
    if len(raw) != 1:
        return 411, "exactly one Content-Length is required"
    value = raw[0].strip()
    if not value.isdigit() or len(value) > 12:
        return 400, "Content-Length must be a non-negative integer"
    if int(value) > MAX_BODY:
        return 413, f"body over {MAX_BODY} bytes"
    return int(value)
