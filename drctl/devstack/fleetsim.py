"""fleetsim: an OpenAI-compatible stand-in for one vLLM replica (see docs/devstack.md, "fleetsim").

Run as `python -m drctl.devstack.fleetsim --host 127.0.0.1 --port P`. The node agent spawns one
per replica, so this module imports only the standard library and aiohttp to start fast.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from aiohttp import web

from drctl.devstack.fleetsim_faults import HANG_MAX_S, Faults, FaultSpec, validated_fault_patch
from drctl.devstack.fleetsim_metrics import CONTENT_TYPE, SURFACES, EngineStats, render
from drctl.devstack.fleetsim_openai import (
    MAX_TOKENS_CAP,
    BadRequest,
    Generation,
    full_response,
    parse_request,
    sse,
    stream_chunk,
    usage_chunk,
)


class SettingsError(ValueError):
    """An invalid FLEETSIM_* environment value; the message names the variable."""


@dataclass(frozen=True)
class FleetsimSettings:
    region: str = "local"
    track: str = "stable"
    replica: str = "fleetsim"
    version: str = "dev"
    model: str = "fleetsim-tiny"
    ttft_ms: float = 30.0
    itl_ms: float = 5.0
    error_rate: float = 0.0
    max_num_seqs: int = 16
    api_key: str | None = None  # vLLM's --api-key: /v1/* then needs `Authorization: Bearer <key>`
    vllm_metrics: str = "v1"  # the /metrics surface: "v1" (vLLM today) or "v0" (the V0 engine's names)
    load_s: float = 0.0  # model load time: nothing listens until it has passed, as with vLLM

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> FleetsimSettings:
        """Read FLEETSIM_* variables (default: os.environ); raise SettingsError on a bad value."""
        env = os.environ if env is None else env
        d = cls()

        def text(name: str, default: str) -> str:
            value = env.get(f"FLEETSIM_{name}", default).strip()
            if not value:
                raise SettingsError(f"FLEETSIM_{name} must not be empty")
            return value

        def number(name: str, default: float, lo: float, hi: float, kind: type = float) -> Any:
            raw = env.get(f"FLEETSIM_{name}")
            if raw is None or raw.strip() == "":
                return default
            try:
                value = kind(raw)
            except ValueError:
                raise SettingsError(f"FLEETSIM_{name}={raw!r} is not a valid {kind.__name__}") from None
            if not lo <= value <= hi:
                raise SettingsError(f"FLEETSIM_{name}={raw!r} must be between {lo} and {hi}")
            return value

        def choice(name: str, default: str, allowed: tuple[str, ...]) -> str:
            value = env.get(f"FLEETSIM_{name}", default).strip()
            if value not in allowed:
                raise SettingsError(f"FLEETSIM_{name}={value!r} must be one of {', '.join(allowed)}")
            return value

        return cls(
            region=text("REGION", d.region), track=text("TRACK", d.track), replica=text("REPLICA", d.replica),
            version=text("VERSION", d.version), model=text("MODEL", d.model),
            ttft_ms=number("TTFT_MS", d.ttft_ms, 0, 600_000), itl_ms=number("ITL_MS", d.itl_ms, 0, 60_000),
            error_rate=number("ERROR_RATE", d.error_rate, 0, 1),
            max_num_seqs=number("MAX_NUM_SEQS", d.max_num_seqs, 1, 100_000, int),
            vllm_metrics=choice("VLLM_METRICS", d.vllm_metrics, SURFACES),
            load_s=number("LOAD_S", d.load_s, 0, 3600),
            # The variable vLLM itself reads for --api-key, so a Deployment's env serves both.
            api_key=env.get("VLLM_API_KEY") or None,
        )  # fmt: skip


# Overload, as vLLM behaves under it: requests past max_num_seqs wait in the scheduler's queue
# (vllm:num_requests_waiting) with no bound and no timeout of the server's own: vLLM's SchedulerConfig
# has no waiting-queue limit and its OpenAI server no request timeout. What ends a wait is the client
# (or the gateway's `timeout server`) giving up: the server then aborts the request, taking it out of
# the queue (vllm/entrypoints/utils.py `with_cancellation`, which races the handler against
# `http.disconnect`). aiohttp does the same for every handler with handler_cancellation on.
SERVER_OPTIONS: dict[str, Any] = {"handler_cancellation": True}


def runner(settings: FleetsimSettings) -> web.AppRunner:
    """An AppRunner of the fleetsim app with the server options `main` uses (for in-process servers)."""
    return web.AppRunner(build_app(settings), **SERVER_OPTIONS)


def _error(status: int, message: str, kind: str, param: str | None = None) -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": param, "code": status}}
    return web.json_response(body, status=status)


def build_app(settings: FleetsimSettings) -> web.Application:
    """The fleetsim aiohttp application for one replica.

    Long (about 150 lines) because its handlers are closures over one replica's engine stats,
    fault state and sequence slots, as vLLM's route handlers share one engine.
    """
    stats = EngineStats(
        model=settings.model, max_num_seqs=settings.max_num_seqs, max_model_len=MAX_TOKENS_CAP * 4
    )
    faults = Faults(settings.error_rate)
    slots = asyncio.Semaphore(settings.max_num_seqs)  # vLLM's max_num_seqs: the rest wait in queue
    identity = {"X-Fleetsim-Region": settings.region, "X-Fleetsim-Track": settings.track,
                "X-Fleetsim-Replica": settings.replica, "X-Fleetsim-Version": settings.version}  # fmt: skip

    async def add_identity(_request: web.Request, response: web.StreamResponse) -> None:
        response.headers.update(identity)

    @web.middleware
    async def count_http(request: web.Request, handler: Any) -> web.StreamResponse:
        # vLLM's prometheus-fastapi-instrumentator counts every answered API request, faults and
        # refusals included; drctl's passive signals read its 5xx share. Outermost, so it sees them all.
        if not request.path.startswith("/v1/"):
            return await handler(request)
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            stats.record_http(request.path, request.method, exc.status)
            raise
        stats.record_http(request.path, request.method, response.status)
        return response

    @web.middleware
    async def fault_gate(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.startswith("/admin/"):
            return await handler(request)
        if not faults.spec.hang or await faults.hold():
            if faults.closing or faults.spec.down:
                return _error(503, "fleetsim replica is down", "ServiceUnavailableError")
        else:
            return _error(504, f"request held by hang fault for {HANG_MAX_S:.0f}s", "TimeoutError")
        if request.path.startswith("/v1/") and faults.should_fail():
            return _error(500, "fleetsim injected error", "InternalServerError")
        return await handler(request)

    @web.middleware
    async def api_key_gate(request: web.Request, handler: Any) -> web.StreamResponse:
        # As vLLM's middleware: only /v1/* is guarded (health and metrics stay open), the header
        # must match exactly, and the answer is a bare 401 {"error": "Unauthorized"}.
        if (
            settings.api_key
            and request.path.startswith("/v1")
            and request.method != "OPTIONS"
            and request.headers.get("Authorization") != f"Bearer {settings.api_key}"
        ):
            return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    async def health(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def models(_request: web.Request) -> web.Response:
        entry = {"id": settings.model, "object": "model", "created": int(time.time()), "owned_by": "fleetsim",
                 "root": settings.model, "max_model_len": stats.max_model_len}  # fmt: skip
        return web.json_response({"object": "list", "data": [entry]})

    async def metrics(_request: web.Request) -> web.Response:
        body = render(stats, settings.vllm_metrics).encode()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    async def load(_request: web.Request) -> web.Response:
        # vLLM's /load: the requests the server is handling now.
        return web.json_response({"server_load": stats.running + stats.waiting})

    async def version(_request: web.Request) -> web.Response:
        return web.json_response({"version": f"fleetsim-{settings.version}"})

    async def fault(request: web.Request) -> web.Response:
        if request.method == "DELETE":
            faults.update(FaultSpec())
        elif request.method == "POST":
            try:
                patch = validated_fault_patch(await request.json())
            except ValueError as exc:  # json.JSONDecodeError is a ValueError too
                return _error(400, f"invalid fault: {exc}", "BadRequestError")
            faults.update(FaultSpec(**{**asdict(faults.spec), **patch}))
        return web.json_response({**asdict(faults.spec), "held_requests": faults.held})

    async def generate(request: web.Request, chat: bool) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        arrival = loop.time()
        try:
            body = await request.json()
            gen = parse_request(body, chat)
        except json.JSONDecodeError:
            return _error(400, "request body is not valid JSON", "BadRequestError")
        except BadRequest as exc:
            return _error(400, str(exc), "BadRequestError", exc.param)
        if body["model"] != settings.model:  # vLLM answers an unknown model with 404
            return _error(404, f"The model `{body['model']}` does not exist.", "NotFoundError", "model")
        # TTFT is measured from arrival, so a request's queue wait is part of it, as in vLLM.
        stats.waiting += 1
        try:
            await slots.acquire()  # cancelled (aborted) when the client hangs up while it waits
        finally:
            stats.waiting -= 1
        stats.queue_time.observe(loop.time() - arrival)
        stats.running += 1
        try:
            return await _emit(request, gen, loop, arrival)
        finally:
            stats.running -= 1
            slots.release()

    async def _emit(
        request: web.Request, gen: Generation, loop: asyncio.AbstractEventLoop, arrival: float
    ) -> web.StreamResponse:
        stats.prompt_tokens += gen.prompt_tokens
        head = {"id": f"{'chatcmpl' if gen.chat else 'cmpl'}-{uuid.uuid4().hex}", "created": int(time.time()),
                "model": settings.model}  # fmt: skip
        # Tokens are scheduled against absolute times so per-token overhead does not add up.
        first_at = loop.time() + (settings.ttft_ms + faults.spec.added_latency_ms) / 1000
        itl_s = settings.itl_ms / 1000
        tokens = gen.tokens()
        stream: web.StreamResponse | None = None
        try:
            if not gen.stream:  # nothing goes out before the end: wait for the first token, then the last
                await asyncio.sleep(max(0.0, first_at - loop.time()))
                stats.ttft.observe(loop.time() - arrival)
                await asyncio.sleep(max(0.0, first_at + (len(tokens) - 1) * itl_s - loop.time()))
                stats.generation_tokens += len(tokens)
            for i, token in enumerate(tokens if gen.stream else ()):
                await asyncio.sleep(max(0.0, first_at + i * itl_s - loop.time()))
                if i == 0:
                    stats.ttft.observe(loop.time() - arrival)
                stats.generation_tokens += 1
                if stream is None:  # headers go out with the first token, so header time is TTFT too
                    stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
                    await stream.prepare(request)
                finish = "length" if i == len(tokens) - 1 else None
                await stream.write(sse(stream_chunk(gen, head, i, token, finish)))
            if stream is not None:
                if gen.include_usage:
                    await stream.write(sse(usage_chunk(gen, head)))
                await stream.write(sse("[DONE]"))
                await stream.write_eof()
        except ConnectionResetError:
            # The client hung up mid-stream; vLLM aborts such a request, so it is not counted a success.
            assert stream is not None
            return stream
        stats.record_success("length")
        stats.e2e.observe(loop.time() - arrival)
        if stream is None:
            return web.json_response(full_response(gen, head, "".join(tokens)))
        return stream

    async def completions(request: web.Request) -> web.StreamResponse:
        return await generate(request, chat=False)

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        return await generate(request, chat=True)

    async def on_shutdown(_app: web.Application) -> None:
        faults.release_all()

    app = web.Application(middlewares=[count_http, fault_gate, api_key_gate])
    app.on_response_prepare.append(add_identity)
    app.on_shutdown.append(on_shutdown)
    # Public under --api-key, as in vLLM: only /v1/* is guarded.
    app.router.add_get("/health", health)
    app.router.add_route("*", "/ping", health)  # vLLM answers GET and POST /ping as /health
    app.router.add_get("/load", load)
    app.router.add_get("/version", version)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)
    for method in ("GET", "POST", "DELETE"):
        app.router.add_route(method, "/admin/fault", fault)
    return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m drctl.devstack.fleetsim", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--api-key", default=None, help="as vLLM's: require this bearer token on /v1/* (env VLLM_API_KEY)"
    )
    args = parser.parse_args(argv)
    try:
        settings = FleetsimSettings.from_env()
    except SettingsError as exc:
        print(f"fleetsim: invalid environment: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.api_key:
        settings = replace(settings, api_key=args.api_key)
    banner = f"fleetsim {settings.replica} ({settings.region}/{settings.track}, {settings.model} " \
             f"{settings.version}) on http://{args.host}:{args.port}"  # fmt: skip
    if settings.load_s:
        # vLLM opens its port only once the model is loaded: until then connections are refused.
        print(f"fleetsim {settings.replica}: loading {settings.model} for {settings.load_s:g}s", flush=True)
        time.sleep(settings.load_s)
    try:
        # run_app turns SIGTERM into a graceful stop; a short shutdown_timeout keeps rolling restarts quick.
        # SO_REUSEPORT: the node agent holds the port for the pod's life (nodeagent.reserve_port).
        web.run_app(build_app(settings), host=args.host, port=args.port, shutdown_timeout=5.0, reuse_port=True,
                    print=lambda _msg: print(banner, flush=True), **SERVER_OPTIONS)  # fmt: skip
    except OSError as exc:
        print(f"fleetsim: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
