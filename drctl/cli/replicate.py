"""`drctl replicate start|stop|status`: the fleet's Replicate workflow (replicate/<fleet>)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from drctl.cli import common

# The Temporal client and the models load where a command runs, not for -h or Tab completion.
if TYPE_CHECKING:
    from temporalio.client import Client

    from drctl.config.schema import FleetConfig
    from drctl.models.rpo import ReplicateInput, ReplicateStatus


def ui_link(cfg: FleetConfig, wid: str) -> str:
    from drctl.client.connection import ui_link as link

    return link(cfg, wid)


def replicate_id(cfg: FleetConfig) -> str:
    return f"replicate/{cfg.name}"


def replicate_input(cfg: FleetConfig) -> ReplicateInput:
    from drctl.models.rpo import ReplicateInput, replica_pairs

    return ReplicateInput(
        fleet=cfg.name,
        task_queue=cfg.temporal.task_queue,
        queues={r.name: r.queue for r in cfg.regions},
        pairs=replica_pairs(cfg),
        rpo_target_s=cfg.objectives.rpo_target_s,
        timeout_s=cfg.data.check_timeout_s,
    )


async def start_replication(client: Client, cfg: FleetConfig) -> tuple[str, bool]:
    """Start replicate/<fleet> unless it runs; returns (workflow id, started)."""
    from drctl.cli.launch import start_unless_running
    from workflows.replicate import Replicate

    if not cfg.data.buckets:
        raise common.UserError(f"{cfg.source_path or 'config'}: data.buckets is empty: nothing to replicate")
    handle, started = await start_unless_running(
        client,
        cfg,
        Replicate.run,
        replicate_input(cfg),
        wid=replicate_id(cfg),
        operation="replicate",
        phase="replicating",
    )
    return handle.id, started


async def replication_status(client: Client, cfg: FleetConfig) -> ReplicateStatus | None:
    from temporalio.service import RPCError

    from drctl.models.rpo import ReplicateStatus

    try:
        return await client.get_workflow_handle(replicate_id(cfg)).query(
            "status", result_type=ReplicateStatus
        )
    except RPCError:
        return None


app = typer.Typer(
    name="replicate",
    help="Model artifact and state replication with rclone (replicate/<fleet>).",
    no_args_is_help=True,
)


@app.command("start")
def start(config: common.ConfigOpt = common.CONFIG, output: common.OutputOpt = common.TABLE) -> None:
    """Start replicating every data.buckets[] entry on its interval (idempotent)."""
    cfg = common.load(config)

    async def go() -> tuple[str, bool]:
        from drctl.client.connection import connect

        return await start_replication(await connect(cfg), cfg)

    wid, started = common.run_async(go)
    if not common.printed_json(output, {"workflow_id": wid, "started": started, "ui": ui_link(cfg, wid)}):
        common.console.print(
            f"replication {'started' if started else 'already running'}: {ui_link(cfg, wid)}"
        )


@app.command("stop")
def stop(
    config: common.ConfigOpt = common.CONFIG,
    output: common.OutputOpt = common.TABLE,
    yes: common.YesOpt = False,
) -> None:
    """Stop replicating after the runs in flight finish: replicas fall behind until `replicate start`."""
    from drctl.cli.launch import stop_workflow

    cfg = common.load(config)
    # Replication is the RPO's protection: stopping it turns protection off, as `monitor stop` does.
    common.confirm(
        yes,
        f"Stop replication of fleet {cfg.name!r}? Replicas fall behind (the RPO is unprotected) "
        "until `drctl replicate start`.",
        "stop replication (replicas would fall behind)",
    )
    stop_workflow(cfg, replicate_id(cfg), lambda handle: handle.signal("stop"), exit_code=1)
    if not common.printed_json(output, {"workflow_id": replicate_id(cfg), "stopping": True}):
        common.console.print(f"replication {replicate_id(cfg)} stopping")


@app.command("status")
def status(config: common.ConfigOpt = common.CONFIG, output: common.OutputOpt = common.TABLE) -> None:
    """Last run of every replica: transfers, bytes, check, lag against the RPO."""
    from rich.table import Table

    from drctl.cli.data_status import lag_cell

    cfg = common.load(config)
    st = common.run_async(lambda: _status(cfg))
    if st is None:
        raise common.UserError(
            f"{replicate_id(cfg)} is not running; start it with `drctl replicate start`", 1
        )
    if common.printed_json(output, st):
        return
    t = Table(
        title=f"replication {cfg.name}: {st.total_runs} runs, {st.total_transfers} objects, "
        f"{st.total_bytes} bytes (RPO target {st.rpo_target_s:g} s)"
    )
    for col in (
        "bucket",
        "replica",
        "mode",
        "runs",
        "failures",
        "last run",
        "transfers",
        "bytes",
        "check",
        "lag",
    ):
        t.add_column(col, overflow="fold")
    for ps in st.pairs:
        r = ps.last
        t.add_row(
            ps.pair.bucket,
            ps.pair.replica_region,
            ps.pair.mode,
            str(ps.runs),
            str(ps.failures),
            f"{r.finished_at:%H:%M:%S}" if r else "never",
            str(r.stats.transfers) if r else "-",
            str(r.stats.bytes) if r else "-",
            ("ok" if r.check_ok else "DIFFERS") if r else "-",
            lag_cell(r.lag.lag_s, st.rpo_target_s) if r else "-",
        )
    common.console.print(t)
    common.console.print(f"UI: {ui_link(cfg, replicate_id(cfg))}")


async def _status(cfg: FleetConfig) -> ReplicateStatus | None:
    from drctl.client.connection import connect

    return await replication_status(await connect(cfg), cfg)
