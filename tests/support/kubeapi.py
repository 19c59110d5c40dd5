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


def endpoint_slice(
    name: str, service: str, pod: str, port: int, ready: bool, terminating: bool = False
) -> dict[str, Any]:
    """One EndpointSlice of `service` with a single endpoint (`pod` on 127.0.0.1:`port`), its
    conditions as the EndpointSlice controller sets them."""
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
        "metadata": {"name": name, "namespace": NS, "labels": {"kubernetes.io/service-name": service}},
        "endpoints": [{"addresses": ["127.0.0.1"],
                       "conditions": {"ready": ready and not terminating, "serving": ready, "terminating": terminating},
                       "targetRef": {"kind": "Pod", "name": pod, "namespace": NS}}],
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
    }  # fmt: skip
