"""What a drctl worker runs: every workflow class and every activity, gathered per module.

Each `workflows.<name>` module exposes `WORKFLOWS: list[type]`; each `activities.<name>` module
exposes `build(cfg: FleetConfig) -> list[Callable]` returning its activity callables (bound methods
of a class that holds the providers it needs).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from drctl.config.schema import FleetConfig

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
    "activities.watch",
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


def workflows() -> list[type]:
    """Every workflow class. A module that is missing or fails to import stops the worker: a worker
    without one of them would leave that operation's tasks queued forever."""
    found: list[type] = []
    for name in WORKFLOW_MODULES:
        found += list(importlib.import_module(name).WORKFLOWS)
    return found


def activities(cfg: FleetConfig) -> list[Callable[..., Any]]:
    """Every activity callable, built for this worker's config (same rule as `workflows`)."""
    found: list[Callable[..., Any]] = []
    for name in ACTIVITY_MODULES:
        found += list(importlib.import_module(name).build(cfg))
    return found
