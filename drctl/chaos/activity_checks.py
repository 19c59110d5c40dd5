"""Every activity's call, typed and timed: what validate runs once the boundary has passed.

For each activity of the hypothesis, method and rollbacks, in order: its provider's arguments after
`${...}` substitution, checked against the function's signature (arguments.py) or, for an HTTP
provider, its headers; then its worst case (budget.py). The sums must fit the drill's deadline.
"""

from __future__ import annotations

import importlib
from typing import Any

from drctl.chaos.arguments import ArgumentRefused, check_arguments, check_headers
from drctl.chaos.boundary import BoundaryViolation, http_view, resolved
from drctl.chaos.budget import Cost, OverBudget, activity_s, check_budget, pauses_s, provider_s
from drctl.config.schema import FleetConfig


class CallRefused(ValueError):
    """An activity's arguments or durations a drill must not run. The message names the field."""


def sections(exp: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(section, field path, activity) for every activity written out as a mapping."""
    hypo = exp.get("steady-state-hypothesis")
    probes = hypo.get("probes") if isinstance(hypo, dict) else None
    found = [
        ("steady-state-hypothesis", f"steady-state-hypothesis.probes[{i}]", a)
        for i, a in enumerate(probes if isinstance(probes, list) else [])
    ]
    for key in ("method", "rollbacks"):
        acts = exp.get(key)
        found += [(key, f"{key}[{i}]", a) for i, a in enumerate(acts if isinstance(acts, list) else [])]
    return [(s, w, a) for s, w, a in found if isinstance(a, dict)]


def _cost(where: str, act: dict[str, Any], conf: dict[str, Any], cfg: FleetConfig) -> Cost:
    provider = act.get("provider") or {}
    if provider.get("type") == "http":
        check_headers(f"{where}.provider.headers", provider.get("headers"))
        return provider_s(where, None, http_view(provider))
    func = str(provider.get("func"))
    fn = getattr(importlib.import_module(str(provider.get("module"))), func)
    args = resolved(f"{where}.provider.arguments", provider.get("arguments") or {}, conf)
    call = check_arguments(f"{where}.provider.arguments", fn, args, cfg.drills.timeout_s)
    return provider_s(where, func, call)


def check_calls(exp: dict[str, Any], conf: dict[str, Any], cfg: FleetConfig) -> None:
    """Raise CallRefused for an argument of the wrong type or range, a header RFC 9110 or drctl
    refuses, or an experiment whose rollbacks might not fit inside the drill's deadline."""
    costs: dict[str, list[Cost]] = {}
    try:
        for section, where, act in sections(exp):
            one = activity_s([*pauses_s(where, act), _cost(where, act, conf, cfg)])
            costs.setdefault(section, []).append(one)
        check_budget(costs, cfg.drills.timeout_s)
    except (ArgumentRefused, OverBudget, BoundaryViolation) as exc:
        raise CallRefused(str(exc)) from None
