"""Writing Kubernetes objects as a real API server expects them.

- Every write names its patch type and asks for strict field validation, so a typo in a field is
  an error rather than a silently dropped field (the server's default only warns).
- A copy of an object (a canary or green track, a migrated or restored object) drops what the
  server allocated for the original: another server, or another object, cannot take them.
- A read-modify-write that meets 409 Conflict reads again and re-applies, a bounded number of times.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeVar

from kubernetes.client.exceptions import ApiException

T = TypeVar("T")

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
STRICT = "Strict"
# Attempts of a read-modify-write before a 409 is the caller's: a controller writing status every
# second can take a version, but five losses in a row mean a writer that will not stop.
CONFLICT_ATTEMPTS = 5

SERVER_META = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
)


def as_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of `obj` without the fields its server allocated, fit to create as a new object."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.setdefault("metadata", {})
    for key in SERVER_META:
        meta.pop(key, None)
    if out.get("kind") == "Service" or "clusterIP" in (out.get("spec") or {}):
        spec = out.setdefault("spec", {})
        for key in ("clusterIP", "clusterIPs", "healthCheckNodePort"):
            spec.pop(key, None)
        for port in spec.get("ports") or []:
            port.pop("nodePort", None)
    return out


def on_conflict(write: Callable[[], T], attempts: int = CONFLICT_ATTEMPTS) -> T:
    """Run a read-modify-write (`write` reads afresh each time) again while it meets 409 Conflict."""
    for attempt in range(1, attempts + 1):
        try:
            return write()
        except ApiException as exc:
            if exc.status != 409 or attempt == attempts:
                raise
    raise AssertionError("unreachable")  # the loop returns or raises
