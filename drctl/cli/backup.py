"""`drctl backup create|list|describe` and `drctl restore`: Velero Backup and Restore objects."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.live import Live
from rich.table import Table

from drctl.cli.common import (
    DEFAULT_CONFIG,
    ConfigOpt,
    Output,
    OutputOpt,
    UserError,
    console,
    load,
    print_json,
)
from drctl.models.upgrade import BackupInfo, BackupRequest, RestoreRequest
from drctl.providers.errors import ProviderError
from drctl.providers.velero import BackupFailed, VeleroBackupProvider

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


def _wait(provider_call, title: str, output: Output) -> BackupInfo:  # type: ignore[no-untyped-def]
    """Run a create-and-wait call, showing the object's phase live; exit 1 when the policy rejects it."""
    try:
        if output is Output.json:
            return provider_call(None)
        with Live(console=console, refresh_per_second=4) as live:
            return provider_call(lambda i: live.update(_table([i], title)))
    except BackupFailed as exc:
        if output is Output.json:
            print_json({"error": str(exc), "object": exc.info.model_dump(mode="json")})
        raise UserError(str(exc), exit_code=1) from None
    except ProviderError as exc:
        raise UserError(str(exc), exit_code=1) from None


def _region(cfg, region: str | None) -> str:  # type: ignore[no-untyped-def]
    return cfg.region(region).name if region else cfg.region_names[0]


def register(app: typer.Typer) -> None:
    backup_app = typer.Typer(help="Velero backups of the inference workload.", no_args_is_help=True)
    app.add_typer(backup_app, name="backup")

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
        provider = VeleroBackupProvider(cfg, r)
        info = _wait(lambda cb: provider.backup(req, on_progress=cb), f"backup in {r}", output)
        if output is Output.json:
            print_json(info.model_dump(mode="json"))
        else:
            console.print(f"backup {info.name}: {info.phase}, {info.items} items, expires {info.expiration}")

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
        provider = VeleroBackupProvider(cfg, r)
        info = _wait(lambda cb: provider.restore(req, on_progress=cb), f"restore in {r}", output)
        if output is Output.json:
            print_json(info.model_dump(mode="json"))
        else:
            console.print(f"restore {info.name}: {info.phase}, {info.items} items restored, {info.warnings} warnings")
