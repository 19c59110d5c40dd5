"""`drctl backup schedule create|list|delete`: Velero Schedule objects in each region's cluster.

A Schedule is declarative configuration that the region's Velero acts on (like `kubectl apply`),
not an operation drctl runs, so the CLI writes it directly; the backups it produces are Velero's.
"""

from __future__ import annotations

import re
from typing import Annotated

import typer
from rich.table import Table

from drctl.cli import common, complete, reads
from drctl.config.schema import FleetConfig
from drctl.models.backup import ScheduleList
from drctl.providers.errors import ProviderError
from drctl.providers.velero_schedule import VeleroSchedules, go_duration_ok

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


def _regions(cfg: FleetConfig, regions: list[str] | None) -> list[str]:
    return [cfg.region(r).name for r in regions] if regions else cfg.region_names


def _provider_error(exc: ProviderError) -> common.UserError:
    return common.UserError(
        str(exc), exit_code=2 if exc.error.kind in ("Conflict", "NotFound", "Invalid") else 1
    )


@app.command("create")
def create(
    every: Annotated[str | None, typer.Option("--every", help="Interval, a Go duration: 1h, 30m.")] = None,
    cron: Annotated[str | None, typer.Option("--cron", help="Cron expression instead of --every.")] = None,
    ttl: Annotated[str, typer.Option("--ttl", help="How long each backup is kept, a Go duration.")] = "720h",
    name: Annotated[
        str | None, typer.Option("--name", help="Schedule name (default: every-<interval>).")
    ] = None,
    region: RegionsOpt = None,
    config: common.ConfigOpt = common.CONFIG,
) -> None:
    """Create a Velero Schedule of the workload namespace in each region's cluster."""
    cfg = common.load(config)
    if bool(every) == bool(cron):
        raise common.UserError("give exactly one of --every (e.g. 1h) or --cron")
    if every and not go_duration_ok(every):
        raise common.UserError(f"--every {every!r}: not a duration like 1h, 30m or 1h30m")
    if not go_duration_ok(ttl):
        raise common.UserError(f"--ttl {ttl!r}: not a duration like 72h or 720h0m0s")
    if cron and len(cron.split()) != 5:
        raise common.UserError(f"--cron {cron!r}: expected 5 fields (minute hour day month weekday)")
    name = name or (f"every-{every}" if every else "cron")
    if not _NAME.match(name):
        raise common.UserError(f"bad name {name!r}: lowercase letters, digits and '-'")
    regions = _regions(cfg, region)
    for r in regions:
        try:
            s = VeleroSchedules(cfg, r).create(
                name,
                f"@every {every}" if every else str(cron),
                ttl,
                [cfg.region(r).kube.namespace],
                {"app": cfg.workload.app},
            )
        except ProviderError as exc:
            raise _provider_error(exc) from None
        common.console.print(f"schedule {s.name} created in {r}: {s.schedule}, backups kept {ttl}")


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
    items = [s for r in regions for s in reads.value_of(res, f"schedules/{r}", ScheduleList).items]
    if common.printed_json(output, items):
        return
    t = Table(title="Velero schedules")
    for col in ("region", "name", "schedule", "ttl", "phase", "last backup"):
        t.add_column(col, no_wrap=True)
    for s in items:
        t.add_row(s.region, s.name, s.schedule, s.ttl or "", s.phase or "New", s.last_backup or "never")
    common.console.print(t)


@app.command("delete")
def delete(
    name: Annotated[str, typer.Argument(help="Schedule name.")],
    region: RegionsOpt = None,
    config: common.ConfigOpt = common.CONFIG,
) -> None:
    """Delete a schedule (its backups stay until their TTL)."""
    cfg = common.load(config)
    for r in _regions(cfg, region):
        try:
            VeleroSchedules(cfg, r).delete(name)
        except ProviderError as exc:
            raise _provider_error(exc) from None
        common.console.print(f"schedule {name} deleted in {r}")
