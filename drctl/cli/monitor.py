"""`drctl monitor start|stop|status|decisions`: the fleet's health monitor workflow (monitor/<fleet>)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from drctl.cli import common

# The Temporal client and the models load where a command runs, not for -h or Tab completion.
if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHandle

    from drctl.config.schema import FleetConfig
    from drctl.models.monitor import MonitorStatus
    from drctl.models.monitor_decisions import DecisionsView

app = typer.Typer(
    name="monitor", help="The fleet's health monitor workflow (monitor/<fleet>).", no_args_is_help=True
)


def monitor_id(cfg: FleetConfig) -> str:
    return f"monitor/{cfg.name}"


async def start_monitor(client: Client, cfg: FleetConfig) -> tuple[WorkflowHandle[Any, Any], bool]:
    """Start the fleet's monitor unless it runs; returns (handle, started)."""
    from drctl.cli.launch import start_unless_running
    from drctl.models.fleet_spec import FleetSpec
    from drctl.models.monitor import MonitorInput
    from workflows.monitor import FleetMonitor

    arg = MonitorInput(spec=FleetSpec.from_config(cfg))
    return await start_unless_running(
        client, cfg, FleetMonitor.run, arg, wid=monitor_id(cfg), operation="monitor", phase="watching"
    )


async def update_monitor(handle: WorkflowHandle[Any, Any], cfg: FleetConfig) -> list[str]:
    """Make a running monitor follow `cfg` (weights, regions, thresholds, policy); returns the changes.

    Applied by the monitor between probe rounds; regions in both configs keep their state.
    """
    from temporalio.client import WorkflowUpdateFailedError

    from drctl.models.fleet_spec import FleetSpec
    from drctl.models.monitor_config import SpecUpdate

    try:
        return await handle.execute_update(
            "update_spec", SpecUpdate(spec=FleetSpec.from_config(cfg)), result_type=list[str]
        )
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause.message if exc.cause is not None and hasattr(exc.cause, "message") else str(exc)
        raise common.UserError(
            f"monitor {handle.id} refused the config {cfg.source_path or ''}: {cause}"
        ) from None


async def monitor_status(client: Client, cfg: FleetConfig) -> MonitorStatus | None:
    """The running monitor's status (`drctl status` too); None when no monitor runs."""
    from drctl.client.monitor_view import live_status

    # The live view: with the watcher, its heartbeat is fresher than the monitor's own state.
    return await _if_running(client, cfg, lambda h: live_status(h, rpc_timeout=ASK_TIMEOUT))


# Bounded: a running monitor whose workers are all gone cannot answer, and `drctl status` at 3 a.m.
# must still print the rest of the fleet.
ASK_TIMEOUT = timedelta(seconds=5)
T = TypeVar("T")


async def _if_running(
    client: Client, cfg: FleetConfig, ask: Callable[[WorkflowHandle[Any, Any]], Awaitable[T]]
) -> T | None:
    """`ask` the fleet's monitor; None when it does not run or does not answer.

    A closed run still answers queries with its last state, so a stopped monitor would otherwise
    show as running: ask whether it runs first.
    """
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    handle = client.get_workflow_handle(monitor_id(cfg))
    try:
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            return None
        return await ask(handle)
    except RPCError:
        return None


@app.command("start")
def start(config: common.ConfigOpt = common.CONFIG, output: common.OutputOpt = common.TABLE) -> None:
    """Start watching every region; a running monitor is updated to follow this config."""
    from drctl.client.connection import connect, ui_link

    cfg = common.load(config)

    async def go() -> tuple[str, bool, list[str]]:
        handle, started = await start_monitor(await connect(cfg), cfg)
        changes = [] if started else await update_monitor(handle, cfg)
        return ui_link(cfg, handle.id), started, changes

    link, started, changes = common.run_async(go)
    doc = {"workflow_id": monitor_id(cfg), "started": started, "changes": changes, "ui": link}
    if common.printed_json(output, doc):
        return
    if started:
        common.console.print(f"monitor started: {link}")
    elif changes:
        common.console.print(
            f"monitor already running; updated to follow {cfg.source_path or 'the config'}: {link}"
        )
        for c in changes:
            common.console.print(f"  {c}")
    else:
        common.console.print(f"monitor already running; it follows this config already: {link}")


@app.command("stop")
def stop(
    config: common.ConfigOpt = common.CONFIG,
    output: common.OutputOpt = common.TABLE,
    yes: common.YesOpt = False,
) -> None:
    """Stop the monitor: automatic failover is off until `monitor start` (a failover it started keeps running)."""
    cfg = common.load(config)
    common.confirm(
        yes,
        f"Stop the monitor of fleet {cfg.name!r}? Automatic failover is off until `drctl monitor start`.",
        "stop the monitor (automatic failover would be off)",
    )
    from drctl.cli.launch import stop_workflow

    stop_workflow(cfg, monitor_id(cfg), lambda handle: handle.cancel(), exit_code=2)
    if not common.printed_json(output, {"workflow_id": monitor_id(cfg), "stopping": True}):
        common.console.print(f"monitor {monitor_id(cfg)} stopping")


def _from_monitor(
    cfg: FleetConfig, read: Callable[[Client, FleetConfig], Awaitable[T | None]], missing: str
) -> T:
    """What `read` gets from the fleet's running monitor; exit 1 saying how to start one when it gets nothing."""
    from drctl.client.connection import connect

    async def go() -> T | None:
        return await read(await connect(cfg), cfg)

    got = common.run_async(go)
    if got is None:
        raise common.UserError(f"monitor {monitor_id(cfg)} {missing}; start it with `drctl monitor start`", 1)
    return got


@app.command("status")
def status(config: common.ConfigOpt = common.CONFIG, output: common.OutputOpt = common.TABLE) -> None:
    """The monitor's view: per-region state, policy, alert."""
    from rich.table import Table

    cfg = common.load(config)
    st = _from_monitor(cfg, monitor_status, "is not running")
    if common.printed_json(output, st):
        return
    if st.alert:
        common.console.print(f"[bold red]ALERT {st.alert}[/]")
    for why in st.unresolved.values():
        common.console.print(f"[red]not probed:[/] {why}")
    common.console.print(_probe_line(st))
    t = Table(title=f"monitor {cfg.name}: policy {st.policy}{' (paused)' if st.paused else ''}")
    for col in ("region", "state", "fails", "oks", "last probe", "ttft p50 ms"):
        t.add_column(col, overflow="fold")
    for r in st.regions.values():
        t.add_row(
            r.region,
            r.state.value,
            str(r.consecutive_failures),
            str(r.consecutive_successes),
            f"{r.last_status.value if r.last_status else '-'} {r.last_reason}"
            + (f" ({r.saturated}: counted as passed)" if r.saturated else ""),
            f"{r.last_ttft_ms:.0f}" if r.last_ttft_ms is not None else "-",
        )
    common.console.print(t)
    for region, v in st.votes.items():
        # Missing is shown as missing: an unanswered or old view is never counted healthy.
        common.console.print(f"vote on {region} at {v.at:%H:%M:%S}: {v.summary()}")
        for vantage, view in v.views.items():
            common.console.print(f"  {vantage}: {view}")


async def monitor_decisions(client: Client, cfg: FleetConfig) -> DecisionsView | None:
    """The running monitor's decision log (its `decisions` query); None when no monitor runs."""
    from drctl.models.monitor_decisions import DecisionsView

    return await _if_running(
        client, cfg, lambda h: h.query("decisions", result_type=DecisionsView, rpc_timeout=ASK_TIMEOUT)
    )


@app.command("decisions")
def decisions(config: common.ConfigOpt = common.CONFIG, output: common.OutputOpt = common.TABLE) -> None:
    """Why traffic is where it is: the monitor's decisions with their evidence, oldest first."""
    cfg = common.load(config)
    view = _from_monitor(cfg, monitor_decisions, "is not running or does not answer")
    if common.printed_json(output, view):
        return
    # One line per decision, not a table: the reasons are sentences, and a terminal column would fold them.
    common.console.print(
        f"decisions of fleet {view.fleet} (failover.rebalance: {view.rebalance}), oldest first"
    )
    for d in view.entries:
        common.console.print(d.line(), markup=False, highlight=False, soft_wrap=True)
    if view.dropped:
        common.console.print(
            f"{view.dropped} older entries dropped (the log keeps the last {len(view.entries)})"
        )
    if view.latest is not None:
        common.console.print(
            f"latest ({view.unchanged} unchanged since the last entry): {view.latest.line()}"
        )
        for region, ev in view.latest.evidence.items():
            common.console.print(f"  {region}: " + ", ".join(f"{k} {v}" for k, v in ev.items()))
    else:
        common.console.print("no decision yet: the monitor decides on its next tick")


def _probe_line(st: MonitorStatus) -> str:
    """Probe rounds and where the states come from: the watcher's heartbeat (how old) or the monitor."""
    line = f"{st.probe_rounds} probe rounds, monitor turn {st.iteration}"
    if not st.watching:
        return line + ("" if st.paused else "; states as of the last round")
    if st.heartbeat_age_s is None:
        return line + "; watcher starting, no heartbeat yet"
    if st.heartbeat_stale:
        return (
            line + f"; [bold red]watcher heartbeat STALE ({st.heartbeat_age_s:.0f} s old)[/]: "
            "states below are the monitor's last, not live"
        )
    return line + f"; live from the watcher's heartbeat {st.heartbeat_age_s:.1f} s ago"
