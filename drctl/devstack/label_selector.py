"""Kubernetes list semantics the emulated API server adds to kmock: label and field selectors, paging."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any


class ApiError(Exception):
    """A Kubernetes API error: served as a Status object with this code and reason.

    `details` overrides the Status details the server fills in (an Invalid error's kind, group and
    field causes, as errors.NewInvalid sets them).
    """

    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details


# Field labels each kind supports beside metadata.name and metadata.namespace (the API server's
# per-kind field label conversion funcs); any other is a 400, as there.
_FIELD_LABELS = {
    "Pod": {"status.phase", "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "status.podIP"},
    "Namespace": {"status.phase"},
    "Service": {"spec.clusterIP", "spec.type"},
}


def parse_selector(selector: str, fields: bool = False) -> list[tuple[str, str, set[str]]]:
    """Parse a labelSelector into (key, op, values); op ∈ =, !=, in, notin, exists, !exists.

    With `fields`, parse a fieldSelector, which allows only =, == and != (as the API server does).
    """
    reqs: list[tuple[str, str, set[str]]] = []
    for part in re.split(r",(?![^()]*\))", selector or ""):
        part = part.strip()
        if not part:
            continue
        if fields:
            m = re.fullmatch(r"([\w.-]+)\s*(==|!=|=)\s*([^,=!]*)", part)
            if not m:
                raise ApiError(
                    400, "BadRequest", f'invalid field selector: "{part}": only =, == and != are supported'
                )
            reqs.append((m[1], "!=" if m[2] == "!=" else "=", {m[3].strip()}))
            continue
        m = re.fullmatch(r"([\w./-]+)\s+(in|notin)\s*\(([^)]*)\)", part)
        if m:
            reqs.append((m[1], m[2], {v.strip() for v in m[3].split(",") if v.strip()}))
            continue
        m = re.fullmatch(r"([\w./-]+)\s*(==|!=|=)\s*([\w./-]*)", part)
        if m:
            reqs.append((m[1], "!=" if m[2] == "!=" else "=", {m[3]}))
            continue
        m = re.fullmatch(r"(!?)([\w./-]+)", part)
        if not m:
            raise ApiError(400, "BadRequest", f"unable to parse requirement: {part!r}")
        reqs.append((m[2], "!exists" if m[1] else "exists", set()))
    return reqs


def selector_matches(reqs: list[tuple[str, str, set[str]]], labels: dict[str, str]) -> bool:
    for key, op, values in reqs:
        has, value = key in labels, labels.get(key)
        ok = {
            "=": has and value in values,
            "in": has and value in values,
            "!=": not has or value not in values,
            "notin": not has or value not in values,
            "exists": has,
            "!exists": not has,
        }[op]
        if not ok:
            return False
    return True


def check_field_labels(kind: str, fields: list[tuple[str, str, set[str]]]) -> None:
    """A 400 for a field label the kind does not support, as the API server's conversion funcs give."""
    allowed = {"metadata.name", "metadata.namespace"} | _FIELD_LABELS.get(kind, set())
    for key, _, _ in fields:
        if key not in allowed:
            raise ApiError(400, "BadRequest", f"field label not supported: {key}")


def object_matches(
    obj: dict[str, Any], labels: list[tuple[str, str, set[str]]], fields: list[tuple[str, str, set[str]]]
) -> bool:
    """Whether an object passes a parsed labelSelector and fieldSelector."""
    meta = obj.get("metadata") or {}
    if not selector_matches(labels, meta.get("labels") or {}):
        return False
    flat: dict[str, str] = {}
    for key, _, _ in fields:
        value: Any = obj
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        flat[key] = "" if value is None else str(value)
    # A field always has a value (maybe ""), so "!=" matches a missing one and "=" needs it equal.
    return all((flat[k] in v) == (op == "=") for k, op, v in fields)


def paginate(
    items: list[dict[str, Any]], limit: str, token: str, rv: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One page of a sorted list and its ListMeta, as the API server pages with `limit`/`continue`.

    The token carries the last key served, as the real one does, so a page never repeats or skips
    an object that stays put between calls.
    """
    start = 0
    if token:
        try:
            after = tuple(json.loads(base64.urlsafe_b64decode(token.encode()))["after"])
        except (binascii.Error, ValueError, KeyError, TypeError):
            raise ApiError(400, "BadRequest", "continue key is not valid") from None
        start = next((i for i, o in enumerate(items) if _sort_key(o) > after), len(items))
    meta: dict[str, Any] = {"resourceVersion": rv}
    size = int(limit) if limit.isdigit() and int(limit) > 0 else 0
    if not size or start + size >= len(items):
        return meta, items[start:]
    page = items[start : start + size]
    meta["continue"] = base64.urlsafe_b64encode(
        json.dumps({"after": list(_sort_key(page[-1]))}).encode()
    ).decode()
    meta["remainingItemCount"] = len(items) - start - size
    return meta, page


def _sort_key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata", {})
    return meta.get("namespace", ""), meta["name"]
