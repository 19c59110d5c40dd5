"""`drctl codec-server`: the Temporal UI's remote codec endpoint, decrypting for those allowed.

The UI (and `temporal workflow show --codec-endpoint`) POSTs `{"payloads": [...]}` (payloads in
protobuf JSON form) to /decode or /encode, from the browser: so CORS answers the UI's origin only,
including the preflight OPTIONS that names the `X-Namespace` header. With a bearer token
configured, /encode and /decode refuse any request without it; the preflight never carries it.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload

from drctl.codec import AesGcmCodec

log = logging.getLogger("drctl.codec_server")
_MAX_BODY = 4 * 1024 * 1024  # the UI decodes one history page at a time
_ALLOW_HEADERS = "Content-Type, X-Namespace, Authorization"


class CodecServer:
    def __init__(self, codec: AesGcmCodec, origins: list[str], token: str | None = None) -> None:
        self.codec, self.origins, self.token = codec, {o.rstrip("/") for o in origins}, token

    def app(self) -> web.Application:
        app = web.Application(client_max_size=_MAX_BODY, middlewares=[self._cors])
        for path in ("/encode", "/decode"):
            app.router.add_post(path, self._handle)
            app.router.add_route("OPTIONS", path, self._preflight)
        return app

    @web.middleware
    async def _cors(self, request: web.Request, handler: Any) -> web.StreamResponse:
        resp = await handler(request)
        origin = request.headers.get("Origin", "").rstrip("/")
        if origin in self.origins:
            resp.headers["Access-Control-Allow-Origin"] = origin
            resp.headers["Access-Control-Allow-Credentials"] = "true"
            resp.headers["Vary"] = "Origin"
        return resp

    async def _preflight(self, request: web.Request) -> web.Response:
        return web.Response(status=200, headers={
            "Access-Control-Allow-Methods": "POST, OPTIONS", "Access-Control-Allow-Headers": _ALLOW_HEADERS,
            "Access-Control-Max-Age": "600"})

    def _authorised(self, request: web.Request) -> bool:
        if not self.token:
            return True
        given = request.headers.get("Authorization", "")
        return hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode())

    async def _handle(self, request: web.Request) -> web.Response:
        if not self._authorised(request):
            return web.json_response({"message": "missing or wrong bearer token"}, status=401)
        try:
            body = await request.json()
            payloads = [json_format.ParseDict(p, Payload()) for p in body["payloads"]]
        except (ValueError, KeyError, TypeError, json_format.ParseError) as exc:
            return web.json_response({"message": f"expected {{\"payloads\": [...]}}: {exc}"}, status=400)
        try:
            if request.path == "/encode":
                out = await self.codec.encode(payloads)
            else:
                out = await self.codec.decode(payloads)
        except Exception as exc:  # noqa: BLE001 - a bad ciphertext or unknown key is the caller's to see
            log.warning("codec %s failed for namespace %s: %s", request.path, request.headers.get("X-Namespace"), exc)
            return web.json_response({"message": f"cannot {request.path.strip('/')}: {exc}"}, status=400)
        return web.Response(text=json.dumps({"payloads": [json_format.MessageToDict(p) for p in out]}),
                            content_type="application/json")
