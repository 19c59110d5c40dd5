"""`drctl dev up|status|down`: the embedded dev stack (Temporal, moto, emulated regions, HAProxy)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from drctl.cli import common
from drctl.cli.durations import seconds

app = typer.Typer(
    name="dev",
    help="The embedded dev stack: everything on one machine, no cloud account.",
    no_args_is_help=True,
)


@app.callback()
def _needs_the_extra() -> None:
    import importlib.util

    # The worker image installs the runtime only; say what is missing instead of a traceback.
    missing = [m for m in ("kmock", "moto") if importlib.util.find_spec(m) is None]
    if missing:
        raise common.UserError(
            f"the dev stack needs the devstack extra ({', '.join(missing)} not installed): "
            "pip install 'drctl[devstack]'"
        )


@app.command("up")
def up_cmd(
    config: common.ConfigOpt = common.CONFIG,
    timeout_s: Annotated[
        float,
        typer.Option(
            "--timeout",
            parser=seconds("--timeout"),
            metavar="DURATION",
            help="How long to wait for the stack to serve (90, 90s, 3m).",
        ),
    ] = 180.0,
    workers: Annotated[
        bool, typer.Option("--workers/--no-workers", help="Also run one drctl worker per region.")
    ] = True,
) -> None:
    """Start what is not running (idempotent) and wait until the whole stack serves."""
    from drctl.devstack import stack

    cfg = common.load(config)
    try:
        with common.console.status("starting the dev stack and waiting until every component serves..."):
            info = stack.up(cfg, common.config_path(config), timeout_s=timeout_s, workers=workers)
    except stack.StackError as exc:
        message = str(exc)
        if exc.log:
            message += f"\n--- last lines of the {exc.component} log ---\n{exc.log}"
            message += "\n(`drctl dev down` stops whatever did start)"
        raise common.UserError(message, exc.exit_code) from None
    table = Table(title=f"dev stack for fleet {cfg.name!r} is up")
    table.add_column("what", overflow="fold")
    table.add_column("where", overflow="fold")
    table.add_row("global endpoint (OpenAI API)", f"{info.global_endpoint}/v1")
    table.add_row("Temporal", info.temporal_address)
    table.add_row("Temporal UI", info.temporal_ui_url)
    for r in info.regions:
        table.add_row(f"{r.name} Kubernetes API", r.kube_api_url)
        table.add_row(f"{r.name} gateway", r.gateway_url)
        if r.admin_url:
            table.add_row(f"{r.name} admin API", r.admin_url)
    table.add_row("moto (S3, Route 53)", info.moto_url)
    table.add_row("HAProxy stats", info.stats_url)
    table.add_row("Prometheus", info.prometheus_url)
    for name in info.pids:
        if name.startswith("worker-"):
            table.add_row(f"drctl {name}", f"pid {info.pids[name]}, log {info.state_dir}/logs/{name}.log")
    table.add_row("state dir", info.state_dir)
    common.console.print(table)
    kept = [n for n in info.pids if n not in info.started]
    if kept:
        common.console.print(f"already running, left alone: {', '.join(kept)}")


@app.command("status")
def status_cmd(config: common.ConfigOpt = common.CONFIG, output: common.OutputOpt = common.TABLE) -> None:
    """Each component's pid, whether it is alive, and whether its ports answer."""
    from drctl.devstack import prometheus, stack

    cfg = common.load(config)
    rows = stack.status(cfg, common.config_path(config))
    if common.printed_json(
        output,
        {
            "state_dir": str(stack.state_dir(cfg)),
            "prometheus_url": prometheus.url(cfg),
            "components": [r.model_dump() for r in rows],
        },
    ):
        return
    table = Table(title=f"dev stack ({stack.state_dir(cfg)})")
    for col in ("component", "pid", "alive", "ports"):
        table.add_column(col, overflow="fold")
    for r in rows:
        ports = ", ".join(
            f"{p['port']} {label} {'open' if p['open'] else 'closed'}" for label, p in r.ports.items()
        )
        table.add_row(r.name, str(r.pid or "-"), "yes" if r.alive else "no", ports)
    common.console.print(table)
    common.console.print(f"Prometheus: {prometheus.url(cfg)}")


@app.command("down")
def down_cmd(config: common.ConfigOpt = common.CONFIG) -> None:
    """Stop every process of the dev stack (Temporal history is kept in the state dir)."""
    from drctl.devstack import stack

    cfg = common.load(config)
    stopped = stack.down(cfg)
    common.console.print(
        f"stopped: {', '.join(stopped)}" if stopped else "nothing of the dev stack was running"
    )
