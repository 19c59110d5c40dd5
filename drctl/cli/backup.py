"""`drctl backup create|list|describe` and `drctl restore`: Velero Backup and Restore objects.

`create` and `restore` start the Backup / Restore workflows (durable, visible in the Temporal UI);
`list` and `describe` read the region's Velero objects directly.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from temporalio.client import WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from drctl.cli.common import (
    DEFAULT_CONFIG,
    ConfigOpt,
    Output,
    OutputOpt,
    UserError,
    console,
    err_console,
    load,
    print_json,
    run_async,
)
from drctl.cli.ops import exit_code, watch
from drctl.config import FleetConfig
from drctl.models.backup import (
    BackupInfo,
    BackupJob,
    BackupJobResult,
    BackupRequest,
    RestoreJob,
    RestoreRequest,
)
from drctl.operations import search_attributes, start_operation
from drctl.outcome import Finished
from drctl.providers.errors import ProviderError
from drctl.providers.velero import VeleroBackupProvider
from drctl.temporal import connect, ui_link

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
RegionOpt = Annotated[str | None, typer.Option("--region", help="Region whose cluster to use (default: the first).")]


def _name(name: str | None, prefix: str) -> str:
    name = name or f"{prefix}-{datetime.now(UTC):%Y%m%d%H%M%S}-{uuid.uuid4().hex[:4]}"
    if not _NAME.match(name):
        raise UserError(f"bad name {name!r}: lowercase letters, digits and '-', at most 63 characters")
    return name


def _table(items: list[BackupInfo], title: str) -> Table:
    t = Table(title=title)
    for col in ("name", "phase", "items", "errors", "warnings", "started", "completed", "reason"):
        t.add_column(col)
    for b in items:
        t.add_row(b.name, b.phase or "New", str(b.items), str(b.errors), str(b.warnings), b.started or "",
                  b.completed or "", b.failure_reason or "")
    return t


async def _follow(cfg: FleetConfig, handle: WorkflowHandle[Any, Any], output: Output
                  ) -> tuple[Finished[BackupJobResult], str]:
    link = ui_link(cfg, handle.id, handle.result_run_id)
    err_console.print(f"started: {handle.id}\nUI: {link}", markup=False, highlight=False)
    return await watch(handle, BackupJobResult, show=output is Output.table), link


def _finish(done: Finished[BackupJobResult], link: str, output: Output, workflow_id: str) -> None:
    """Print the object; exit 1 when the policy rejected it (the reason names the phase), 3 when busy."""
    res = done.result
    info = res.info.model_dump(mode="json") if res.info else None
    if output is Output.json:
        body = {**(info or {}), "workflow_id": workflow_id, "ui_link": link}
        print_json(body if res.ok else {"error": res.reason, "object": info, "workflow_id": workflow_id,
                                        "ui_link": link})
    elif res.info is not None:
        console.print(_table([res.info], f"{res.kind.lower()} in {res.region}"))
    if not res.ok:
        raise UserError(f"{res.reason} (see {link})", exit_code=exit_code(done) or 1)
    if output is Output.table and res.info is not None:
        i = res.info
        what = f"expires {i.expiration}" if res.kind == "Backup" else f"{i.warnings} warnings"
        console.print(f"{res.kind.lower()} {i.name}: {i.phase}, {i.items} items, {what}")
        console.print(f"UI: {link}", markup=False, highlight=False)


def _region(cfg, region: str | None) -> str:  # type: ignore[no-untyped-def]
    return cfg.region(region).name if region else cfg.region_names[0]


def _refuse_existing(cfg: FleetConfig, region: str, name: str) -> None:
    """Velero names are unique: re-using one would silently report the old backup as this one."""
    try:
        VeleroBackupProvider(cfg, region).describe_backup(name)
    except ProviderError as exc:
        if exc.error.kind == "NotFound":
            return
        raise UserError(str(exc), exit_code=1) from None
    raise UserError(f"backup {name!r} already exists in {region}; pick another --name")


def register(app: typer.Typer) -> None:
    backup_app = typer.Typer(help="Velero backups of the inference workload.", no_args_is_help=True)
    app.add_typer(backup_app, name="backup")
    from drctl.cli.backup_schedule import register_schedule

    register_schedule(backup_app)

    @backup_app.command("create")
    def create(
        name: Annotated[str | None, typer.Option("--name", help="Backup name (default: generated).")] = None,
        region: RegionOpt = None,
        config: ConfigOpt = Path(DEFAULT_CONFIG),
        output: OutputOpt = Output.table,
    ) -> None:
        """Back up the workload namespace of one region's cluster and wait for Velero to finish."""
        cfg = load(config)
        r = _region(cfg, region)
        req = BackupRequest(region=r, name=_name(name, "manual"), namespaces=[cfg.region(r).kube.namespace],
                            label_selector={"app": cfg.workload.app})
        _refuse_existing(cfg, r, req.name)
        job = BackupJob(fleet=cfg.name, queue=cfg.region(r).queue, request=req)
        wid = f"backup/{cfg.name}/{req.name}"

        async def go() -> tuple[Finished[BackupJobResult], str]:
            from workflows.backup import Backup

            client = await connect(cfg)
            try:
                # A backup changes no workload, so it runs beside any operation (no fleet claim).
                handle = await client.start_workflow(
                    Backup.run, job, id=wid, task_queue=cfg.temporal.task_queue,
                    search_attributes=search_attributes(cfg.name, "backup", target=r),
                    memo={"fleet": cfg.name, "operation": "backup", "target": r},
                    id_conflict_policy=WorkflowIDConflictPolicy.FAIL)
            except WorkflowAlreadyStartedError:
                raise UserError(f"backup {req.name} is already being taken: {ui_link(cfg, wid)}", exit_code=1) from None
            return await _follow(cfg, handle, output)

        res, link = run_async(go)
        _finish(res, link, output, wid)

    @backup_app.command("list")
    def list_cmd(region: RegionOpt = None, config: ConfigOpt = Path(DEFAULT_CONFIG),
                 output: OutputOpt = Output.table) -> None:
        """Backups known to one region's Velero, newest first."""
        cfg = load(config)
        r = _region(cfg, region)
        try:
            items = VeleroBackupProvider(cfg, r).list_backups()
        except ProviderError as exc:
            raise UserError(str(exc), exit_code=1) from None
        if output is Output.json:
            print_json([b.model_dump(mode="json") for b in items])
        else:
            console.print(_table(items, f"backups in {r}"))

    @backup_app.command("describe")
    def describe(name: Annotated[str, typer.Argument(help="Backup name.")], region: RegionOpt = None,
                 config: ConfigOpt = Path(DEFAULT_CONFIG), output: OutputOpt = Output.table) -> None:
        """One backup's phase, item count, errors and expiry."""
        cfg = load(config)
        r = _region(cfg, region)
        try:
            info = VeleroBackupProvider(cfg, r).describe_backup(name)
        except ProviderError as exc:
            if exc.error.kind == "NotFound":
                raise UserError(f"no backup {name!r} in {r}; see `drctl backup list --region {r}`") from None
            raise UserError(str(exc), exit_code=1) from None
        if output is Output.json:
            print_json(info.model_dump(mode="json"))
        else:
            console.print(_table([info], f"backup {name} in {r}"))

    @app.command("restore")
    def restore(
        backup: Annotated[str, typer.Option("--backup", help="Backup to restore (any region's: the bucket is shared).")],
        region: RegionOpt = None,
        namespace_mapping: Annotated[list[str], typer.Option("--namespace-mapping", help="SRC:DST (repeatable).")] = [],  # noqa: B006
        policy: Annotated[str, typer.Option("--existing-resource-policy", help="none or update.")] = "none",
        config: ConfigOpt = Path(DEFAULT_CONFIG),
        output: OutputOpt = Output.table,
    ) -> None:
        """Restore a backup into one region's cluster and wait for Velero to finish."""
        cfg = load(config)
        r = _region(cfg, region)
        if policy not in ("none", "update"):
            raise UserError(f"bad --existing-resource-policy {policy!r}: none or update")
        mapping: dict[str, str] = {}
        for m in namespace_mapping:
            src, sep, dst = m.partition(":")
            if not sep or not _NAME.match(src) or not _NAME.match(dst):
                raise UserError(f"bad --namespace-mapping {m!r}: expected SRC:DST namespace names")
            mapping[src] = dst
        req = RestoreRequest(region=r, name=_name(None, f"restore-{backup}"[:40]), backup_name=backup,
                             namespace_mapping=mapping, existing_resource_policy=policy)  # type: ignore[arg-type]
        job = RestoreJob(fleet=cfg.name, queue=cfg.region(r).queue, request=req)
        wid = f"restore/{cfg.name}/{req.name}"

        async def go() -> tuple[Finished[BackupJobResult], str]:
            from workflows.backup import Restore

            client = await connect(cfg)
            # A restore overwrites workload objects: exclusive, like any mutating operation
            # (FleetBusyError names the running one and exits 3).
            handle = await start_operation(client, cfg, Restore.run, job, operation="restore", workflow_id=wid,
                                           target=r, memo={"backup": backup})
            return await _follow(cfg, handle, output)

        res, link = run_async(go)
        _finish(res, link, output, wid)
