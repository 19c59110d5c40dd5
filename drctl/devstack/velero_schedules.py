"""The dev-stack Velero's Schedule controller: a Backup from each Schedule's template when it is due.

As Velero does: `@every <duration>` or a 5-field cron; a Schedule without a last backup is due at
once; Backups are named `<schedule>-<YYYYMMDDhhmmss>`, carry the Schedule's labels (or its template's)
and are labelled `velero.io/schedule-name`;
`status.phase` is Enabled (or FailedValidation with the reason) and `status.lastBackup` is set.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

from croniter import croniter

from drctl.devstack.velero_store import go_duration

SCHEDULE_LABEL = "velero.io/schedule-name"
_FMT = "%Y-%m-%dT%H:%M:%SZ"


class _Api(Protocol):
    ns: str

    async def _req(self, method: str, path: str, body: Any = None, params: dict | None = None) -> Any: ...


def next_run(schedule: str, last: datetime | None) -> datetime | None:
    """When the schedule is next due after `last` (None: due now); raises ValueError if invalid."""
    if schedule.startswith("@every "):
        every = go_duration(schedule.removeprefix("@every ").strip())
        if every.total_seconds() <= 0:
            raise ValueError(f"invalid @every duration in {schedule!r}")
        return None if last is None else last + every
    if not croniter.is_valid(schedule):
        raise ValueError(f"invalid schedule {schedule!r}")
    return None if last is None else croniter(schedule, last).get_next(datetime)


async def reconcile_schedules(api: _Api) -> None:
    base = f"/apis/velero.io/v1/namespaces/{api.ns}"
    listing = await api._req("GET", f"{base}/schedules")
    now = datetime.now(UTC).replace(microsecond=0)
    for sch in (listing or {}).get("items", []):
        name = sch["metadata"]["name"]
        spec, status = sch.get("spec") or {}, sch.get("status") or {}
        last = (
            datetime.strptime(status["lastBackup"], _FMT).replace(tzinfo=UTC)
            if status.get("lastBackup")
            else None
        )
        try:
            due = next_run(spec.get("schedule", ""), last)
        except ValueError as exc:
            if status.get("phase") != "FailedValidation":
                await api._req(
                    "PATCH",
                    f"{base}/schedules/{name}",
                    {"status": {"phase": "FailedValidation", "validationErrors": [str(exc)]}},
                )
            continue
        if due is not None and due > now:
            if status.get("phase") != "Enabled":
                await api._req("PATCH", f"{base}/schedules/{name}", {"status": {"phase": "Enabled"}})
            continue
        template = dict(spec.get("template") or {})
        # As Velero's BackupBuilder.FromSchedule: the template's metadata labels if it has any, else
        # the Schedule's own labels, plus the schedule's name; the template becomes the spec.
        labels = (
            (template.get("metadata") or {}).get("labels") or sch["metadata"].get("labels") or {}
        ).copy()
        backup = {
            "apiVersion": "velero.io/v1",
            "kind": "Backup",
            "metadata": {
                "name": f"{name}-{now:%Y%m%d%H%M%S}",
                "namespace": api.ns,
                "labels": {**labels, SCHEDULE_LABEL: name},
            },
            "spec": template,
        }
        await api._req("POST", f"{base}/backups", backup)
        await api._req(
            "PATCH",
            f"{base}/schedules/{name}",
            {"status": {"phase": "Enabled", "lastBackup": now.strftime(_FMT)}},
        )
