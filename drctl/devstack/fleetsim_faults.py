"""fleetsim's injected faults: what /admin/fault sets, and the state that holds, fails or delays requests."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

HANG_MAX_S = 300.0  # a hang fault never holds a request longer than this, so nothing leaks forever


@dataclass
class FaultSpec:
    """What /admin/fault sets; all-default means no fault."""

    down: bool = False
    error_rate: float = 0.0
    added_latency_ms: float = 0.0
    hang: bool = False


_FAULT_LIMITS = {"error_rate": (0.0, 1.0), "added_latency_ms": (0.0, HANG_MAX_S * 1000)}


def validated_fault_patch(body: Any) -> dict[str, Any]:
    """The fields of a POST /admin/fault body, checked; ValueError names what is wrong."""
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object")
    known = FaultSpec.__dataclass_fields__
    patch: dict[str, Any] = {}
    for key, value in body.items():
        if key not in known:
            raise ValueError(f"unknown fault field {key!r}; allowed: {sorted(known)}")
        if key in _FAULT_LIMITS:
            lo, hi = _FAULT_LIMITS[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
                raise ValueError(f"{key} must be a number between {lo} and {hi}")
            value = float(value)
        elif not isinstance(value, bool):
            raise ValueError(f"{key} must be a boolean")
        patch[key] = value
    return patch


class Faults:
    """The injected-fault state of this replica, plus what a hang fault needs to hold and release requests."""

    def __init__(self, base_error_rate: float) -> None:
        self.spec = FaultSpec()
        self.base_error_rate = base_error_rate
        self.held = 0
        self.closing = False
        self._released = asyncio.Event()
        self._released.set()
        # Bresenham-style accumulator: failures are spread evenly, so any N consecutive /v1 calls
        # see round(N * rate) +- 1 errors. A test (or a canary analysis) over N requests is then
        # reliable, which a coin flip per request would not be.
        self._error_credit = 0.0

    def update(self, spec: FaultSpec) -> None:
        self.spec = spec
        if spec.hang and not self.closing:
            self._released.clear()
        else:
            self._released.set()

    def release_all(self) -> None:
        """On shutdown, let held requests go so SIGTERM does not wait out the hang bound."""
        self.closing = True
        self._released.set()

    async def hold(self) -> bool:
        """Hold the caller while a hang fault is on; False if the HANG_MAX_S bound ran out."""
        self.held += 1
        try:
            await asyncio.wait_for(self._released.wait(), HANG_MAX_S)
            return True
        except TimeoutError:
            return False
        finally:
            self.held -= 1

    def should_fail(self) -> bool:
        # Env rate and fault rate are independent failure sources, so they combine like probabilities.
        rate = 1 - (1 - self.base_error_rate) * (1 - self.spec.error_rate)
        if rate <= 0:
            return False
        self._error_credit += rate
        if self._error_credit >= 1 - 1e-9:
            self._error_credit -= 1
            return True
        return False
