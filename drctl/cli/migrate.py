"""`drctl migrate`: move the workload from one region's cluster to another's, and its traffic after it."""

from __future__ import annotations

from typing import Annotated

import typer

from drctl.cli import common, complete
from drctl.cli.operation import RunOptions, run_options
from drctl.cli.upgrade import new_id, parse_steps, plan_rows, render

app = typer.Typer()


@app.command("migrate")
@run_options()
def migrate(
    from_: Annotated[
        str,
        typer.Option(
            "--from", help="Source region (its cluster is backed up).", autocompletion=complete.regions
        ),
    ],
    to: Annotated[
        str,
        typer.Option(
            "--to", help="Target region (the backup is restored there).", autocompletion=complete.regions
        ),
    ],
    target_namespace: Annotated[
        str | None, typer.Option("--target-namespace", help="Namespace in the target.")
    ] = None,
    steps: Annotated[
        str | None, typer.Option("--steps", help="Share of the source's traffic moved per step.")
    ] = None,
    decommission: Annotated[
        bool, typer.Option("--decommission", help="Scale the source to zero at the end.")
    ] = False,
    config: common.ConfigOpt = common.CONFIG,
    *,
    run: RunOptions,
) -> None:
    """Move the workload from one region's cluster to another's, and its traffic after it."""
    from drctl.models.migration import MigrationResult, migration_request

    cfg = common.load(config)
    cfg.region(from_)
    cfg.region(to)
    if from_ == to:
        raise common.UserError(f"--from and --to are both {to}")
    req = migration_request(
        cfg, new_id(), from_, to, target_namespace, parse_steps(steps) if steps else None, decommission
    )
    wid = f"migrate/{cfg.name}/{req.migration_id}"
    if run.dry_run:
        common.print_plan(run.output, f"migrate {from_} → {to}", wid, req, plan_rows(req))
        return
    if decommission:  # scales the source's workload to zero: as destructive as a delete
        common.confirm(
            run.yes,
            f"Migrate fleet {cfg.name!r} from {from_} to {to} and scale {from_} to zero at the end?",
            f"decommission {from_}",
        )
    from workflows.migrate import Migration

    run.operate(
        cfg,
        "migrate",
        Migration.run,
        req,
        MigrationResult,
        render,
        operation="migrate",
        workflow_id=wid,
        source=from_,
        target=to,
    )
