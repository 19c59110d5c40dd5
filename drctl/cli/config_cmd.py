"""`drctl config validate` and `drctl config schema`."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from drctl.cli.common import (
    DEFAULT_CONFIG,
    TABLE,
    OutputOpt,
    console,
    err_console,
    is_document,
    print_json,
    shown,
)
from drctl.config.schema import load_config
from drctl.config.warnings import warnings

app = typer.Typer(name="config", help="Fleet configuration.", no_args_is_help=True)


@app.command("validate")
def validate(
    file: Annotated[Path, typer.Argument(help="Fleet config file.", envvar="DRCTL_CONFIG")] = Path(
        DEFAULT_CONFIG
    ),
    output: OutputOpt = TABLE,
) -> None:
    """Validate a fleet config; list every problem with its field path (exit 2 when invalid).

    Warnings (valid settings that defeat an objective, e.g. a Route 53 TTL longer than the RTO
    leaves) are printed too, but do not change the exit code.
    """
    cfg = load_config(file)
    norm = cfg.normalised_weights()
    warned = warnings(cfg)
    if is_document(output):
        print_json(
            {
                "file": str(file),
                "valid": True,
                "warnings": [w.model_dump(exclude_none=True) for w in warned],
                "config": cfg.model_dump(mode="json", by_alias=True),
            },
            output,
        )
        return
    # Every value below came from the file: shown() escapes control characters and rich markup.
    table = Table(title=f"{shown(file)}: fleet {shown(repr(cfg.name))} is valid")
    for col in ("region", "weight", "share", "replicas", "kubernetes", "gateway"):
        table.add_column(col, overflow="fold")
    for r in cfg.regions:
        kube = r.kube.api_url or (
            f"context {r.kube.context}"
            if r.kube.context
            else "in-cluster"
            if r.kube.in_cluster
            else "in-cluster or current context"
        )
        table.add_row(
            shown(r.name),
            str(r.weight),
            f"{norm[r.name]:.0%}",
            str(r.replicas),
            shown(kube),
            shown(r.gateway_url),
        )
    console.print(table)
    h, o = cfg.health, cfg.objectives
    console.print(
        f"health every {h.interval_s:g}s (timeout {h.probe_timeout_s:g}s, threshold {h.failure_threshold}); "
        f"RTO {o.rto_target_s:g}s, RPO {o.rpo_target_s:g}s; failover {cfg.failover.policy}; "
        f"global tier {cfg.traffic.global_tier.kind}, regional tier {cfg.traffic.regional_tier.kind}",
        markup=False,
    )
    for w in warned:
        console.print(f"[yellow]warning:[/yellow] {shown(w.path)}: {shown(w.message)}", soft_wrap=True)


class SchemaFormat(enum.StrEnum):
    json = "json"
    markdown = "markdown"


@app.command("schema")
def schema(
    output: Annotated[
        SchemaFormat,
        typer.Option("--output", "-o", help="json: the JSON Schema; markdown: the reference page."),
    ] = SchemaFormat.json,
    fmt: Annotated[
        SchemaFormat | None,
        typer.Option("--format", hidden=True, help="Deprecated spelling of --output."),
    ] = None,
) -> None:
    """Print the fleet config's JSON Schema (from the models), or the reference page made from it.

    docs/fleet-config.schema.json and docs/config-reference.md are this command's output.
    """
    from drctl.config import reference

    chosen = fmt or output
    if fmt is not None:
        err_console.print("warning: --format is deprecated; use -o/--output", markup=False, highlight=False)
    sys.stdout.write(reference.schema_text() if chosen is SchemaFormat.json else reference.markdown())
