"""The CLI's reads of the fleet, answered by the workers (the FleetRead workflow, workflows/reads.py).

The CLI needs nothing but Temporal: it starts one short FleetRead with what it wants to know, the
workflow asks each region's own queue (and the main queue for fleet-wide reads), and every part
comes back as a value or as the reason it is missing: a region whose queue nobody polls is
"no worker polling <queue>", never a traceback or a silent None.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from drctl.models.drill import DrillReport
from drctl.models.failover import FailoverInput
from drctl.models.rpo import LagReport

# The ApplicationError type of a part whose queue had no worker (no poller, or schedule-to-start ran out).
NO_WORKER = "NoWorker"

ReadWhat = Literal[
    "status", "failover_plan", "backups", "backup", "schedules", "drill_history", "drill_report"
]


def no_worker(queue: str) -> str:
    return f"no worker polling {queue}"


class ReadInput(BaseModel):
    fleet: str
    what: ReadWhat
    queues: dict[str, str] = Field(description="Region name -> that region's activity task queue.")
    regions: list[str] = Field(default_factory=list, description="The regions whose parts to read.")
    no_worker: list[str] = Field(
        default_factory=list, description="Queues the CLI saw no poller on: answered at once, not asked."
    )
    name: str | None = Field(
        None, description="The backup name or drill id, for `backup` and `drill_report`."
    )
    limit: int = Field(20, description="drill_history: at most this many reports.")
    probe_timeout_s: float = 2.0
    queue_wait_s: float = Field(
        5.0, description="Schedule-to-start of every read: how long a region's queue may go unserved."
    )
    failover: FailoverInput | None = Field(None, description="failover_plan: the failover to plan.")
    data: bool = Field(True, description="status: also the replication lag, releases and last backups.")


class ScheduleChange(BaseModel):
    """`drctl backup schedule create|delete`: one Velero Schedule written in each region by its worker.

    A Schedule is declarative configuration (like `kubectl apply`), not an operation: no fleet lock,
    no DrctlFleet/DrctlOperation search attributes. Each region is its own part, as in a read.
    """

    fleet: str
    action: Literal["create", "delete"]
    name: str
    queues: dict[str, str] = Field(description="Region name -> that region's activity task queue.")
    regions: list[str]
    no_worker: list[str] = Field(default_factory=list, description="Queues the CLI saw no poller on.")
    schedule: str = Field("", description="create: `@every 1h` or a 5-field cron expression.")
    ttl: str = Field("720h", description="create: how long each backup is kept, a Go duration.")
    labels: dict[str, str] = Field(default_factory=dict, description="create: the backups' label selector.")
    queue_wait_s: float = Field(5.0, description="Schedule-to-start of each write.")


class ScheduleWrite(BaseModel):
    """One region's part of a ScheduleChange, as its worker's activity receives it."""

    region: str
    action: Literal["create", "delete"]
    name: str
    schedule: str = ""
    ttl: str = "720h"
    labels: dict[str, str] = {}


class ReadPart(BaseModel):
    """One read's answer: `value` (plain JSON data), or `error` with its kind (NO_WORKER, NotFound, ...)."""

    value: Any = None
    error: str | None = None
    kind: str | None = None
    queue: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class ReadResult(BaseModel):
    parts: dict[str, ReadPart] = {}

    def value(self, key: str) -> Any:
        part = self.parts.get(key)
        return part.value if part is not None and part.ok else None


class LagList(BaseModel):
    reports: list[LagReport] = []


class DrillHistoryRequest(BaseModel):
    fleet: str
    limit: int = 20


class DrillHistory(BaseModel):
    reports: list[DrillReport] = []


class DrillReportRequest(BaseModel):
    drill_id: str


class DrillReportText(BaseModel):
    report: DrillReport
    markdown: str
