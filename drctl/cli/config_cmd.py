"""`drctl config validate` and `drctl config schema`."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from drctl.cli.common import (
    TABLE,
    OutputOpt,
    UserError,
    config_path,
    console,
    err_console,
    is_document,
    print_json,
    shown,
)

# The config's models load when a command runs, not for -h or Tab completion.


def load_config(path: Path) -> Any:
    from drctl.config.schema import load_config as load

    return load(path)


app = typer.Typer(name="config", help="Fleet configuration.", no_args_is_help=True)


@app.command("validate")
def validate(
    file: Annotated[
        Path | None,
        typer.Argument(
            help="Fleet config file (default: the one -c would find: DRCTL_CONFIG, context, ...)."
        ),
    ] = None,
    output: OutputOpt = TABLE,
) -> None:
    """Validate a fleet config; list every problem with its field path (exit 2 when invalid).

    Warnings (valid settings that defeat an objective, e.g. a Route 53 TTL longer than the RTO
    leaves) are printed too, but do not change the exit code.
    """
    file = config_path(file)
    from drctl.config.warnings import warnings

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


# Fleets by name (drctl/cli/contexts.py): kubectl's `config get-contexts` / `use-context` / `set-context`.
ContextName = Annotated[str, typer.Argument(help="Context name, e.g. prod.")]


@app.command("get-contexts")
def get_contexts(output: OutputOpt = TABLE) -> None:
    """List the fleets by name, the current one marked, and which config this command line would use."""
    from drctl.cli.contexts import contexts_file, read

    path = contexts_file()
    current, found = read(path)
    using: str | None = None
    why = ""
    try:
        using = str(config_path(None))
    except UserError as exc:
        why = str(exc)
    rows = [
        {
            "name": c.name,
            "current": c.name == current,
            "config": str(c.config),
            "temporal_address": c.temporal_address,
            "temporal_namespace": c.temporal_namespace,
        }
        for c in found.values()
    ]
    if is_document(output):
        print_json(
            {"file": str(path), "current_context": current, "contexts": rows, "config_in_use": using}, output
        )
        return
    table = Table(title=f"contexts in {shown(path)}")
    for col in ("current", "name", "config", "temporal"):
        table.add_column(col, overflow="fold")
    for r in rows:
        temporal = " ".join(str(v) for v in (r["temporal_address"], r["temporal_namespace"]) if v) or "-"
        table.add_row("*" if r["current"] else "", shown(r["name"]), shown(r["config"]), shown(temporal))
    console.print(table)
    console.print(f"config in use here: {using}" if using else f"no config in use here: {why}", markup=False)


@app.command("use-context")
def use_context(name: ContextName, output: OutputOpt = TABLE) -> None:
    """Make NAME the current context: commands without -c or --fleet use its fleet."""
    from drctl.cli.contexts import contexts_file, read, write

    path = contexts_file()
    _, found = read(path)
    if name not in found:
        known = ", ".join(sorted(found)) or "none: add one with `drctl config set-context NAME --config FILE`"
        raise UserError(f"no context {name!r} in {path} (known: {known})")
    write(path, name, found)
    if not is_document(output):
        console.print(f"current context: {name} ({found[name].config})", markup=False)
    else:
        print_json({"file": str(path), "current_context": name, "config": str(found[name].config)}, output)


@app.command("set-context")
def set_context(
    name: ContextName,
    file: Annotated[Path, typer.Option("--config", "-c", help="The fleet's config file (stored absolute).")],
    temporal_address: Annotated[
        str | None, typer.Option("--temporal-address", help="host:port, over the fleet config's.")
    ] = None,
    temporal_namespace: Annotated[
        str | None, typer.Option("--temporal-namespace", help="Namespace, over the fleet config's.")
    ] = None,
    use: Annotated[bool, typer.Option("--use", help="Also make it the current context.")] = False,
    output: OutputOpt = TABLE,
) -> None:
    """Add or replace the context NAME: a name for a fleet config file (and its Temporal)."""
    from drctl.cli.contexts import NAME, Context, contexts_file, read, write

    if not NAME.match(name):
        raise UserError(f"context name {name!r}: letters, digits, '.', '_' and '-' (at most 63)")
    load_config(file)  # a context names a config that loads: refused here, not at 3 a.m.
    path = contexts_file()
    current, found = read(path)
    found[name] = Context(name, file.expanduser().resolve(), temporal_address, temporal_namespace)
    write(path, name if use else current, found)
    c = found[name]
    if is_document(output):
        doc = {"name": name, "config": str(c.config), "current": use or current == name}
        print_json(
            doc | {"temporal_address": temporal_address, "temporal_namespace": temporal_namespace}, output
        )
        return
    console.print(f"context {name}: {c.config}" + (" (current)" if use else ""), markup=False)
