"""Helpers for tests that drive the emulated cluster through the official kubernetes client."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
NS = "inference"


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    # The server runs on this event loop; the blocking client must run beside it.
    return await asyncio.to_thread(fn, *args, **kwargs)


def deployment(
    name: str, track: str, replicas: int = 2, image: str = "vllm/vllm-openai:v1"
) -> dict[str, Any]:
    labels = {"app": "llm", "drctl.io/track": track}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "server", "image": image}]},
            },
        },
    }
