"""What a drctl worker runs: every workflow class and every activity, imported directly.

Each `workflows.<name>` module exposes `WORKFLOWS: list[type]`; each `activities.<name>` module
exposes `build(cfg: FleetConfig) -> list[Callable]` returning its activity callables (bound methods
of a class that holds the providers it needs). Imported here rather than named by strings, so a
renamed or missing module fails at import, in mypy and in the import contracts, not in a worker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from activities import backup as backup_activities
from activities import capacity as capacity_activities
from activities import chaos as chaos_activities
from activities import health as health_activities
from activities import notify as notify_activities
from activities import operations as operations_activities
from activities import outcomes as outcomes_activities
from activities import platform as platform_activities
from activities import reads as read_activities
from activities import replicate as replicate_activities
from activities import reports as reports_activities
from activities import slo as slo_activities
from activities import tier_watch as tier_watch_activities
from activities import traffic as traffic_activities
from activities import upgrade as upgrade_activities
from activities import verify as verify_activities
from activities import watch as watch_activities
from drctl.config.schema import FleetConfig
from workflows import backup as backup_workflows
from workflows import drill as drill_workflows
from workflows import failback as failback_workflows
from workflows import failover as failover_workflows
from workflows import imported as imported_workflows
from workflows import lock as lock_workflows
from workflows import migrate as migrate_workflows
from workflows import monitor as monitor_workflows
from workflows import notify as notify_workflows
from workflows import reads as read_workflows
from workflows import rebalance as rebalance_workflows
from workflows import replicate as replicate_workflows
from workflows import schedules as schedule_workflows
from workflows import upgrade as upgrade_workflows


def workflows() -> list[type]:
    """Every workflow class: a worker without one of them would leave its tasks queued forever."""
    return [
        *lock_workflows.WORKFLOWS,
        *monitor_workflows.WORKFLOWS,
        *failover_workflows.WORKFLOWS,
        *failback_workflows.WORKFLOWS,
        *imported_workflows.WORKFLOWS,
        *upgrade_workflows.WORKFLOWS,
        *migrate_workflows.WORKFLOWS,
        *backup_workflows.WORKFLOWS,
        *drill_workflows.WORKFLOWS,
        *replicate_workflows.WORKFLOWS,
        *notify_workflows.WORKFLOWS,
        *read_workflows.WORKFLOWS,
        *schedule_workflows.WORKFLOWS,
        *rebalance_workflows.WORKFLOWS,
    ]


def activities(cfg: FleetConfig) -> list[Callable[..., Any]]:
    """Every activity callable, built for this worker's config."""
    return [
        *health_activities.build(cfg),
        *watch_activities.build(cfg),
        *capacity_activities.build(cfg),
        *traffic_activities.build(cfg),
        *tier_watch_activities.build(cfg),
        *platform_activities.build(cfg),
        *operations_activities.build(cfg),
        *verify_activities.build(cfg),
        *slo_activities.build(cfg),
        *backup_activities.build(cfg),
        *upgrade_activities.build(cfg),
        # With drill_faults' activities: a drill clears the faults it set.
        *chaos_activities.build(cfg),
        *reports_activities.build(cfg),
        *replicate_activities.build(cfg),
        *outcomes_activities.build(cfg),
        *notify_activities.build(cfg),
        *read_activities.build(cfg),
    ]
