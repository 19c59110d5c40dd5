"""Providers built per region on first use: a worker must start while a cluster or gateway is down."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class PerRegion(Generic[T]):
    """`build(region)` once per region, on the first call for it; safe across activity threads."""

    def __init__(self, build: Callable[[str], T]) -> None:
        self._build = build
        self._built: dict[str, T] = {}
        self._lock = threading.Lock()

    def __call__(self, region: str) -> T:
        with self._lock:
            if region not in self._built:
                self._built[region] = self._build(region)
            return self._built[region]
