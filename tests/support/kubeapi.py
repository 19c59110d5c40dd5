"""Helpers for tests that drive the emulated cluster through the official kubernetes client."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

T = TypeVar("T")
NS = "inference"


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    # The server runs on this event loop; the blocking client must run beside it.
    return await asyncio.to_thread(fn, *args, **kwargs)


@contextlib.asynccontextmanager
async def running(controller: Any) -> AsyncIterator[Any]:
    """Run an in-process controller (its `run()` loop) on this loop until the context exits."""
    task = asyncio.create_task(controller.run())
    try:
        yield controller
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def accepted_at(route: dict[str, Any]) -> bool:
    """Whether every parent's Accepted condition is True at the route's current generation."""
    parents = (route.get("status") or {}).get("parents") or []
    generation = route["metadata"]["generation"]
    return bool(parents) and all(
        any(
            c["type"] == "Accepted" and c["status"] == "True" and c.get("observedGeneration") == generation
            for c in p.get("conditions") or []
        )
        for p in parents
    )


def routes(ns: str = NS) -> tuple[str, str, str, str]:
    """CustomObjectsApi's (group, version, namespace, plural) for the HTTPRoutes of `ns`."""
    return ("gateway.networking.k8s.io", "v1", ns, "httproutes")


def http_route(
    name: str, backend_refs: list[dict[str, Any]], *, parent: str | None = None, **rule: Any
) -> dict[str, Any]:
    """An HTTPRoute with one rule (`backend_refs` and any other fields of `rule`), attached to the
    Gateway `parent` when one is named."""
    spec: dict[str, Any] = {"parentRefs": [{"name": parent}]} if parent else {}
    spec["rules"] = [{"backendRefs": backend_refs, **rule}]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name},
        "spec": spec,
    }


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
