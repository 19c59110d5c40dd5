"""Watches as the API server streams them: selectors applied, resourceVersion and timeoutSeconds honoured.

Without a resourceVersion (or with "0") a watch starts with the matching objects as ADDED; from a
list's resourceVersion it sends only what changes next. An object that stops matching the
selector is sent as DELETED, as the API server's filtered watch does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from kmock._internal import aiobus

from drctl.devstack.kube_resources import RESOURCES
from drctl.devstack.label_selector import check_field_labels, object_matches, parse_selector


async def watch_events(
    key: str,
    namespace: str | None,
    params: Mapping[str, str],
    bus: aiobus.Bus[Any],
    list_objects: Callable[..., list[dict[str, Any]]],
) -> AsyncIterator[dict[str, Any]]:
    """The events of one watch request on `key` ("group/version/plural"), from the store's bus."""
    labels = parse_selector(params.get("labelSelector", ""))
    fields = parse_selector(params.get("fieldSelector", ""), fields=True)
    if key in RESOURCES:
        check_field_labels(RESOURCES[key][0], fields)
    marker = await bus.mark()  # before the snapshot, so no write between them is lost
    timeout = float(params.get("timeoutSeconds") or 0) or None
    seen: set[tuple[str, str]] = set()
    try:
        if params.get("resourceVersion", "0") in ("", "0"):
            for obj in list_objects(key, namespace, params.get("labelSelector", "")):
                if object_matches(obj, [], fields):
                    seen.add((obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))
                    yield {"type": "ADDED", "object": obj}
        async with asyncio.timeout(timeout):
            async for event in bus.stream(since=marker):
                obj = event["object"]
                meta = obj.get("metadata") or {}
                ident = (meta.get("namespace", ""), meta.get("name", ""))
                if namespace is not None and ident[0] != namespace:
                    continue
                if object_matches(obj, labels, fields):
                    seen.add(ident)
                    yield event
                elif ident in seen:
                    seen.discard(ident)
                    yield {"type": "DELETED", "object": obj}
    except TimeoutError:
        return
    finally:
        await bus.unmark(marker)
