"""What a drctl worker runs: every workflow class and every activity, gathered per module.

Each `workflows.<name>` module exposes `WORKFLOWS: list[type]`; each `activities.<name>` module
exposes `build(cfg: FleetConfig) -> list[Callable]` returning its activity callables (bound methods
of a class that holds the providers it needs).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from drctl.config import FleetConfig

WORKFLOW_MODULES = [
    "workflows.lock",
    "workflows.monitor",
    "workflows.failover",
    "workflows.failback",
    "workflows.upgrade",
    "workflows.migrate",
    "workflows.backup",
    "workflows.drill",
    "workflows.replicate",
    "workflows.notify",
]

ACTIVITY_MODULES = [
    "activities.health",
    "activities.traffic",
    "activities.platform",
    "activities.operations",
    "activities.verify",
    "activities.backup",
    "activities.upgrade",
    "activities.chaos",
    "activities.reports",
    "activities.replicate",
    "activities.outcomes",
    "activities.notify",
]


def _optional(name: str) -> Any | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None


def workflows() -> list[type]:
    found: list[type] = []
    for name in WORKFLOW_MODULES:
        mod = _optional(name)
        if mod is not None:
            found += list(mod.WORKFLOWS)
    return found


def activities(cfg: FleetConfig) -> list[Callable[..., Any]]:
    found: list[Callable[..., Any]] = []
    for name in ACTIVITY_MODULES:
        mod = _optional(name)
        if mod is not None:
            found += list(mod.build(cfg))
    return found
