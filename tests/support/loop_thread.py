"""An event loop on a background thread, for servers that synchronous clients call into.

The kubernetes and boto3 clients block; an aiohttp or kmock server on the test's own loop would
never get to answer them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from typing import Any, TypeVar

import kmock
from aiohttp import web

from tests.support.ports import free_port

T = TypeVar("T")
C = TypeVar("C", bound=AbstractAsyncContextManager[Any])


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._stack = AsyncExitStack()
        self._thread = threading.Thread(target=self.loop.run_forever, name="loop-thread", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=timeout_s)

    def enter(self, cm: AbstractAsyncContextManager[T]) -> T:
        """Enter an async context manager on the loop; it exits on close()."""
        return self.run(self._stack.enter_async_context(cm))

    def serve_app(self, app: web.Application, port: int) -> None:
        async def start() -> None:
            runner = web.AppRunner(app)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            self._stack.push_async_callback(runner.cleanup)

        self.run(start())

    def serve_cluster(self, make: Callable[[], C]) -> tuple[C, str]:
        """A kmock emulator built by `make` on the loop (it creates asyncio primitives), served on a free
        loopback port until close(): the emulator and its URL."""

        async def build() -> C:
            return make()

        emulator = self.run(build())
        self.enter(emulator)
        port = free_port()
        self.enter(kmock.Server(emulator, host="127.0.0.1", port=port))
        return emulator, f"http://127.0.0.1:{port}"

    def close(self) -> None:
        self.run(self._stack.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
