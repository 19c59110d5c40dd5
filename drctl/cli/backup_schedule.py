"""`drctl backup schedule create|list|delete`: Velero Schedule objects in each region's cluster.

A Schedule is declarative configuration that the region's Velero acts on (like `kubectl apply`),
not an operation drctl runs: no fleet lock. The CLI needs only Temporal: each region's worker writes
its Schedule (the BackupScheduleChange workflow, workflows/schedules.py) and `list` reads through
them too. The backups a Schedule produces are Velero's.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.table import Table

from drctl.cli import common, complete, reads
from drctl.cli.durations import delta, go_duration
from drctl.cli.lazy import Lazy

# Loaded where a command runs, not for -h or Tab completion (drctl/cli/lazy.py).
if TYPE_CHECKING:
    from pydantic import BaseModel

    import drctl.config.schema as _config_schema
    import drctl.models.backup as _models_backup
    import drctl.models.reads as _models_reads
else:
    _config_schema = Lazy("drctl.config.schema")
    _models_backup = Lazy("drctl.models.backup")
    _models_reads = Lazy("drctl.models.reads")

M = TypeVar("M", bound="BaseModel")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?$")
app = typer.Typer(
    name="schedule",
    help="Velero Schedules: periodic backups taken by each region's Velero.",
    no_args_is_help=True,
)

RegionsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--region", help="Region (repeatable); default every region.", autocompletion=complete.regions
    ),
]


def _regions(cfg: _config_schema.FleetConfig, regions: list[str] | None) -> list[str]:
    return [cfg.region(r).name for r in regions] if regions else cfg.region_names


@app.command("create")
def create(
    every: Annotated[
        timedelta | None,
        typer.Option(
            "--every", parser=delta("--every"), metavar="DURATION", help="Interval: 1h, 30m, 1h30m."
        ),
    ] = None,
    cron: Annotated[str | None, typer.Option("--cron", help="Cron expression instead of --every.")] = None,
    ttl: Annotated[
        timedelta,
        typer.Option(
            "--ttl",
            parser=delta("--ttl"),
            metavar="DURATION",
            help="How long each backup is kept: 720h, 30m.",
        ),
    ] = timedelta(hours=720),
    name: Annotated[
        str | None, typer.Option("--name", help="Schedule name (default: every-<interval>).")
    ] = None,
    region: RegionsOpt = None,
    config: common.ConfigOpt = common.CONFIG,
    dry_run: common.DryRunOpt = False,
    output: common.OutputOpt = common.TABLE,
) -> None:
    """Create a Velero Schedule of the workload namespace in each region's cluster."""
    cfg = common.load(config)
    if bool(every) == bool(cron):
        raise common.UserError("give exactly one of --every (e.g. 1h) or --cron")
    # Velero reads Go durations in whole seconds: both are written so (drctl.cli.durations).
    every_go, ttl_go = (go_duration(every) if every else None), go_duration(ttl)
    if every is not None and every.total_seconds() < 1:
        raise common.UserError(f"--every {every_go}: at least 1s")
    if cron and len(cron.split()) != 5:
        raise common.UserError(f"--cron {cron!r}: expected 5 fields (minute hour day month weekday)")
    name = name or (f"every-{every_go}" if every_go else "cron")
    if not _NAME.match(name):
        raise common.UserError(f"bad name {name!r}: lowercase letters, digits and '-'")
    regions = _regions(cfg, region)
    when = f"@every {every_go}" if every_go else str(cron)
    if dry_run:
        planned = [
            _models_backup.ScheduleInfo(
                name=name, region=r, schedule=when, ttl=ttl_go, namespaces=[cfg.region(r).kube.namespace]
            )
            for r in regions
        ]
        rows = [
            (p.region, f"Schedule {p.name}: {p.schedule}, namespaces {', '.join(p.namespaces)}")
            for p in planned
        ]
        common.print_plan(output, f"create schedule {name}, backups kept {ttl_go}", None, planned, rows)
        return
    res = reads.change_schedules(
        cfg, "create", name, regions, schedule=when, ttl=ttl_go, labels={"app": cfg.workload.app}
    )
    created = _written(res, regions, _models_backup.ScheduleInfo)
    if not common.is_document(output):
        for s in created:
            common.console.print(
                f"schedule {s.name} created in {s.region}: {s.schedule}, backups kept {ttl_go}"
            )
    common.printed_json(output, created)


def _written(res: _models_reads.ReadResult, regions: list[str], model: type[M]) -> list[M]:
    """Each region's part; the regions written are said before the first failure is raised."""
    done: list[M] = []
    written: list[str] = []
    failure = None
    for r in regions:
        try:
            done.append(reads.value_of(res, f"schedule/{r}", model))
            written.append(r)
        except common.UserError as exc:
            failure = failure or common.UserError(f"{r}: {exc}", exc.exit_code)
    if failure is not None:
        if written:
            common.err_console.print(f"written in {', '.join(written)} only")
        raise failure
    return done


@app.command("list")
def list_(
    region: RegionsOpt = None,
    config: common.ConfigOpt = common.CONFIG,
    output: common.OutputOpt = common.TABLE,
) -> None:
    """Schedules of every region, with the time of their last backup."""
    cfg = common.load(config)
    regions = _regions(cfg, region)
    res = reads.ask(cfg, "schedules", regions=regions)
    items = [
        s for r in regions for s in reads.value_of(res, f"schedules/{r}", _models_backup.ScheduleList).items
    ]
    if common.printed_json(output, items):
        return
    t = Table(title="Velero schedules")
    for col in ("region", "name", "schedule", "ttl", "phase", "last backup"):
        t.add_column(col, overflow="fold")
    for s in items:
        t.add_row(s.region, s.name, s.schedule, s.ttl or "", s.phase or "New", s.last_backup or "never")
    common.console.print(t)


@app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="Schedule name.")],
    region: RegionsOpt = None,
    config: common.ConfigOpt = common.CONFIG,
    dry_run: common.DryRunOpt = False,
    yes: common.YesOpt = False,
    output: common.OutputOpt = common.TABLE,
) -> None:
    """Delete a schedule (its backups stay until their TTL)."""
    cfg = common.load(config)
    regions = _regions(cfg, region)
    if dry_run:
        planned = [{"name": name, "region": r} for r in regions]
        rows = [(r, f"delete Schedule {name}") for r in regions]
        common.print_plan(output, f"delete schedule {name}", None, planned, rows)
        return
    common.confirm(
        yes, f"Delete backup schedule {name!r} in {', '.join(regions)}?", f"delete schedule {name}"
    )
    res = reads.change_schedules(cfg, "delete", name, regions)
    _written(res, regions, _models_reads.ScheduleWrite)
    if not common.is_document(output):
        for r in regions:
            common.console.print(f"schedule {name} deleted in {r}")
    common.printed_json(output, {"deleted": name, "regions": regions})
