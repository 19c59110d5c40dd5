"""Kubernetes label selectors (equality- and set-based), as the emulated API server evaluates them."""

from __future__ import annotations

import re


class ApiError(Exception):
    """A Kubernetes API error: served as a Status object with this code and reason."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def parse_selector(selector: str) -> list[tuple[str, str, set[str]]]:
    """Parse a labelSelector into (key, op, values); op ∈ =, !=, in, notin, exists, !exists."""
    reqs: list[tuple[str, str, set[str]]] = []
    for part in re.split(r",(?![^()]*\))", selector or ""):
        part = part.strip()
        if not part:
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
