"""`drctl backup create|list|describe` and `drctl restore`: Velero Backup and Restore objects.

`create` and `restore` start the Backup / Restore workflows (durable, visible in the Temporal UI);
`list` and `describe` ask the region's worker to read its Velero objects (FleetRead).
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from drctl.cli import backup_schedule, common, complete, reads
from drctl.cli.lazy import Lazy
from drctl.cli.operation import RunOptions, run_options

# Loaded where a command runs, not for -h or Tab completion (drctl/cli/lazy.py).
if TYPE_CHECKING:
    import temporalio.client as _temporalio_client
    import temporalio.common as _temporalio_common
    import temporalio.exceptions as _temporalio_exceptions

    import drctl.cli.launch as _cli_launch
    import drctl.client.connection as _client_connection
    import drctl.client.operations as _client_operations
    import drctl.config.schema as _config_schema
    import drctl.models.backup as _models_backup
else:
    _temporalio_client = Lazy("temporalio.client")
    _temporalio_common = Lazy("temporalio.common")
    _temporalio_exceptions = Lazy("temporalio.exceptions")
    _cli_launch = Lazy("drctl.cli.launch")
    _client_connection = Lazy("drctl.client.connection")
    _client_operations = Lazy("drctl.client.operations")
    _config_schema = Lazy("drctl.config.schema")
    _models_backup = Lazy("drctl.models.backup")

# `restore` is a top-level command beside the `backup` group: both live here and share the rendering.
app = typer.Typer()
backup_app = typer.Typer(
    name="backup", help="Velero backups of the inference workload.", no_args_is_help=True
)
backup_app.add_typer(backup_schedule.app)
app.add_typer(backup_app)

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
RegionOpt = Annotated[
    str | None,
    typer.Option(
        "--region", help="Region whose cluster to use (default: the first).", autocompletion=complete.regions
    ),
]


def _name(name: str | None, prefix: str) -> str:
    name = name or f"{prefix}-{datetime.now(UTC):%Y%m%d%H%M%S}-{uuid.uuid4().hex[:4]}"
    if not _NAME.match(name):
        raise common.UserError(f"bad name {name!r}: lowercase letters, digits and '-', at most 63 characters")
    return name


def _table(items: list[_models_backup.BackupInfo], title: str) -> Table:
    t = Table(title=title)
    for col in ("name", "phase", "items", "errors", "warnings", "started", "completed", "reason"):
        t.add_column(col, overflow="fold")
    for b in items:
        t.add_row(
            b.name,
            b.phase or "New",
            str(b.items),
            str(b.errors),
            str(b.warnings),
            b.started or "",
            b.completed or "",
            b.failure_reason or "",
        )
    return t


def render_job(res: _models_backup.BackupJobResult, link: str) -> None:
    """The Backup or Restore object; a policy rejection is named on stderr (the exit code is 1)."""
    if res.info is not None:
        common.console.print(_table([res.info], f"{res.kind.lower()} in {res.region}"))
    if not res.ok:
        common.err_console.print(
            f"error: {res.reason} (see {link})", markup=False, highlight=False, soft_wrap=True
        )
        return
    if res.info is not None:
        i = res.info
        what = f"expires {i.expiration}" if res.kind == "Backup" else f"{i.warnings} warnings"
        common.console.print(f"{res.kind.lower()} {i.name}: {i.phase}, {i.items} items, {what}")
    common.console.print(f"UI: {link}", markup=False, highlight=False)


def job_json(launched: _cli_launch.Launched[_models_backup.BackupJobResult]) -> dict[str, Any]:
    """The object with its workflow id and link; when rejected, the reason beside the object."""
    assert launched.done is not None
    res = launched.done.result
    info = res.info.model_dump(mode="json") if res.info else None
    where = {"workflow_id": launched.workflow_id, "ui_link": launched.link}
    return {**(info or {}), **where} if res.ok else {"error": res.reason, "object": info, **where}


def _region(cfg: _config_schema.FleetConfig, region: str | None) -> str:
    return cfg.region(region).name if region else cfg.region_names[0]


def _refuse_existing(cfg: _config_schema.FleetConfig, region: str, name: str) -> None:
    """Velero names are unique: re-using one would silently report the old backup as this one."""
    part = reads.ask(cfg, "backup", regions=[region], name=name).parts[f"backup/{region}"]
    if part.kind == "NotFound":
        return
    if not part.ok:
        raise reads.part_error(part)
    raise common.UserError(f"backup {name!r} already exists in {region}; pick another --name")


@backup_app.command("create")
@run_options(yes=False)
def create(
    name: Annotated[str | None, typer.Option("--name", help="Backup name (default: generated).")] = None,
    region: RegionOpt = None,
    config: common.ConfigOpt = common.CONFIG,
    *,
    run: RunOptions,
) -> None:
    """Back up the workload namespace of one region's cluster and wait for Velero to finish."""
    cfg = common.load(config)
    r = _region(cfg, region)
    req = _models_backup.BackupRequest(
        region=r,
        name=_name(name, "manual"),
        namespaces=[cfg.region(r).kube.namespace],
        label_selector={"app": cfg.workload.app},
    )
    job = _models_backup.BackupJob(fleet=cfg.name, queue=cfg.region(r).queue, request=req)
    wid = f"backup/{cfg.name}/{req.name}"
    if run.dry_run:
        common.print_plan(run.output, f"backup {req.name} in {r}", wid, job, _backup_rows(req))
        return
    _refuse_existing(cfg, r, req.name)

    async def start(client: _temporalio_client.Client) -> _temporalio_client.WorkflowHandle[Any, Any]:
        from workflows.backup import Backup

        try:
            # A backup changes no workload, so it runs beside any operation (no fleet claim).
            return await client.start_workflow(
                Backup.run,
                job,
                id=wid,
                task_queue=cfg.temporal.task_queue,
                search_attributes=_client_operations.search_attributes(
                    cfg.name, "backup", target=r, initiator=client.identity
                ),
                memo={"fleet": cfg.name, "operation": "backup", "target": r, "initiator": client.identity},
                static_summary=_client_operations.summary("backup", cfg.name, client.identity, None, r),
                id_conflict_policy=_temporalio_common.WorkflowIDConflictPolicy.FAIL,
            )
        except _temporalio_exceptions.WorkflowAlreadyStartedError:
            raise common.UserError(
                f"backup {req.name} is already being taken: {_client_connection.ui_link(cfg, wid)}",
                exit_code=1,
            ) from None

    run.launch(cfg, "backup", start, _models_backup.BackupJobResult, render_job, job_json)


def _backup_rows(req: _models_backup.BackupRequest) -> list[tuple[str, str]]:
    selector = ", ".join(f"{k}={v}" for k, v in req.label_selector.items())
    return [
        ("Velero Backup", f"{req.name} in {req.region}'s cluster"),
        ("namespaces", ", ".join(req.namespaces)),
        ("label selector", selector or "-"),
        ("ttl", req.ttl or "backup.ttl"),
    ]


def _print(output: common.Output, items: list[_models_backup.BackupInfo], data: Any, title: str) -> None:
    if not common.printed_json(output, data):
        common.console.print(_table(items, title))


@backup_app.command("list")
def list_cmd(
    region: RegionOpt = None,
    config: common.ConfigOpt = common.CONFIG,
    output: common.OutputOpt = common.TABLE,
) -> None:
    """Backups known to one region's Velero, newest first."""
    cfg = common.load(config)
    r = _region(cfg, region)
    items = reads.value_of(
        reads.ask(cfg, "backups", regions=[r]), f"backups/{r}", _models_backup.BackupList
    ).items
    _print(output, items, [b.model_dump(mode="json") for b in items], f"backups in {r}")


@backup_app.command("describe")
def describe(
    name: Annotated[str, typer.Argument(help="Backup name.")],
    region: RegionOpt = None,
    config: common.ConfigOpt = common.CONFIG,
    output: common.OutputOpt = common.TABLE,
) -> None:
    """One backup's phase, item count, errors and expiry."""
    cfg = common.load(config)
    r = _region(cfg, region)
    info = reads.value_of(
        reads.ask(cfg, "backup", regions=[r], name=name),
        f"backup/{r}",
        _models_backup.BackupInfo,
        f"no backup {name!r} in {r}; see `drctl backup list --region {r}`",
    )
    _print(output, [info], info.model_dump(mode="json"), f"backup {name} in {r}")


@app.command("restore")
@run_options()
def restore(
    backup: Annotated[
        str, typer.Option("--backup", help="Backup to restore (any region's: the bucket is shared).")
    ],
    region: RegionOpt = None,
    namespace_mapping: Annotated[
        list[str], typer.Option("--namespace-mapping", help="SRC:DST (repeatable).")
    ] = [],  # noqa: B006
    policy: Annotated[
        str,
        typer.Option("--existing-resource-policy", help="none or update (overwrites objects: asks first)."),
    ] = "none",
    config: common.ConfigOpt = common.CONFIG,
    *,
    run: RunOptions,
) -> None:
    """Restore a backup into one region's cluster and wait for Velero to finish."""
    cfg = common.load(config)
    r = _region(cfg, region)
    if policy not in ("none", "update"):
        raise common.UserError(f"bad --existing-resource-policy {policy!r}: none or update")
    mapping: dict[str, str] = {}
    for m in namespace_mapping:
        src, sep, dst = m.partition(":")
        if not sep or not _NAME.match(src) or not _NAME.match(dst):
            raise common.UserError(f"bad --namespace-mapping {m!r}: expected SRC:DST namespace names")
        mapping[src] = dst
    outside = sorted(set(mapping.values()) - set(cfg.restore_namespaces(r)))
    if outside:
        raise common.UserError(
            f"--namespace-mapping: {', '.join(outside)} is not a namespace a restore may write; allowed: "
            f"{', '.join(cfg.restore_namespaces(r))} (kube.namespace and backup.restore_namespaces)"
        )
    req = _models_backup.RestoreRequest(
        region=r,
        name=_name(None, f"restore-{backup}"[:40]),
        backup_name=backup,
        namespace_mapping=mapping,
        existing_resource_policy=policy,
    )  # type: ignore[arg-type]
    job = _models_backup.RestoreJob(fleet=cfg.name, queue=cfg.region(r).queue, request=req)
    wid = f"restore/{cfg.name}/{req.name}"
    if run.dry_run:
        rows = [
            ("Velero Restore", f"{req.name} of backup {backup} in {r}'s cluster"),
            ("namespace mapping", ", ".join(f"{a} → {b}" for a, b in mapping.items()) or "-"),
            (
                "namespaces restored",
                ", ".join(
                    f"{ns} → {mapping.get(ns, ns)}"
                    for ns in _models_backup.restore_scope(mapping, cfg.restore_namespaces(r))
                )
                + " (any other namespace of the backup is left out)",
            ),
            ("existing objects", "updated (overwritten)" if policy == "update" else "left as they are"),
        ]
        common.print_plan(run.output, f"restore {backup} into {r}", wid, job, rows)
        return
    if policy == "update":
        common.confirm(
            run.yes,
            f"Restore {backup} into {r}, overwriting the objects that already exist there?",
            f"overwrite objects in {r}",
        )
    from workflows.backup import Restore

    # A restore overwrites workload objects: exclusive, like any mutating operation.
    run.operate(
        cfg,
        "restore",
        Restore.run,
        job,
        _models_backup.BackupJobResult,
        render_job,
        operation="restore",
        workflow_id=wid,
        target=r,
        memo={"backup": backup},
        as_json=job_json,
    )
