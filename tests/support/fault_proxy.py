"""A loopback proxy in front of a Kubernetes API server (or S3) that injects the faults real ones produce.

Everything is forwarded untouched to the upstream (a kmock `RegionCluster`) unless a `Fault`
matches the request: then the proxy answers as a real API server does under that condition (a
`Status` body with the code and reason, `Retry-After` on 429), or stalls the request without an
answer, for its first `times` matching requests. `hits` counts every matching request, so a test can
assert how often the client (or Temporal's retry policy) came back.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

_REASONS = {403: "Forbidden", 409: "Conflict", 429: "TooManyRequests", 500: "InternalError"}


@dataclass
class Fault:
    method: str  # GET, POST, PUT, PATCH, DELETE
    path: str  # a regex matched against the whole request path
    status: int = 500  # 0 = stall: hold the request open and never answer
    times: int = 1_000_000  # the first N matching requests fail; later ones pass through
    retry_after_s: int | None = None
    message: str = ""
    body: str | None = None  # a raw reply instead of a Kubernetes Status (e.g. S3's XML error)
    hits: int = field(default=0, init=False)
    at: list[float] = field(default_factory=list, init=False)  # monotonic time of each hit

    def matches(self, request: web.Request) -> bool:
        return request.method == self.method and re.fullmatch(self.path, request.path) is not None


class KubeFaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults: list[Fault] = []
        self._session: aiohttp.ClientSession | None = None
        self._closing: asyncio.Event | None = None

    def add(self, fault: Fault) -> Fault:
        self.faults.append(fault)
        return fault

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        app.on_shutdown.append(self._release)
        app.on_cleanup.append(self._close)
        return app

    async def _release(self, _app: web.Application) -> None:
        if self._closing is not None:
            self._closing.set()  # stalled requests end with the proxy, so its shutdown is not held

    async def _close(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        for fault in self.faults:
            if fault.matches(request):
                fault.hits += 1
                fault.at.append(time.monotonic())
                if fault.hits <= fault.times:
                    return await self._inject(fault, request)
        return await self._forward(request)

    async def _inject(self, fault: Fault, request: web.Request) -> web.StreamResponse:
        if fault.status == 0:
            # The client's read timeout must end this, not the proxy (bounded by the proxy's shutdown).
            self._closing = self._closing or asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), timeout=3600)
            raise web.HTTPServiceUnavailable()
        if fault.body is not None:
            return web.Response(text=fault.body, status=fault.status, content_type="application/xml")
        reason = _REASONS.get(fault.status, "InternalError")
        message = fault.message or f"injected {fault.status} on {request.method} {request.path}"
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": fault.status,
        }
        headers = {"Retry-After": str(fault.retry_after_s)} if fault.retry_after_s is not None else {}
        return web.json_response(body, status=fault.status, headers=headers)

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with self._session.request(
            request.method, f"{self.upstream}{request.path_qs}", headers=headers, data=await request.read()
        ) as up:
            body = await up.read()
            return web.Response(body=body, status=up.status, content_type=up.content_type)


async def serve(proxy: KubeFaultProxy, port: int) -> web.AppRunner:
    runner = web.AppRunner(proxy.app())
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner
