"""`drctl failover`, `drctl failback`, `drctl monitor start|stop|status`."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDConflictPolicy
from temporalio.service import RPCError

from drctl import search_attributes as sa
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
from drctl.models.failover import (
    FailbackInput,
    FailbackResult,
    FailoverInput,
    FailoverPlan,
    FailoverResult,
    MonitorInput,
    MonitorStatus,
    capacity_of,
    plan_failover,
    target_problem,
)
from drctl.models.ops import FleetSpec
from drctl.models.traffic import GlobalChange
from drctl.operations import start_operation
from drctl.outcome import Finished
from drctl.temporal import connect, ui_link
from workflows.common import fmt_weights

Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
NoWait = Annotated[bool, typer.Option("--no-wait", help="Start and return; follow it in the UI or `drctl ops show`.")]


def dry_run_plan(cfg: FleetConfig, target: str, source: str | None, *, emergency: bool = False,
                 force: bool = False) -> FailoverPlan:
    """The plan the workflow would follow (the same `plan_failover`), from live reads; changes nothing."""
    import asyncio

    from drctl.providers.kubernetes import KubernetesPlatform
    from drctl.providers.probe import InferenceProber
    from drctl.providers.traffic_factory import global_traffic

    spec = FleetSpec.from_config(cfg)
    weights = global_traffic(cfg).get_weights()
    name = cfg.workload.deployment_name("stable")
    dep = KubernetesPlatform(cfg.region(target)).get_deployment(name)
    cap = capacity_of(target, name, dep.replicas, dep.ready_replicas, cfg.region(target).max_replicas,
                      dep.hpa_min_replicas, dep.hpa_max_replicas)
    probe = None if force else asyncio.run(InferenceProber(cfg).probe_region(target))
    return plan_failover(spec, weights, target, source, cap, emergency=emergency, force=force,
                         target_issue=target_problem(probe, emergency, cfg.health.fail_on_degraded))


def _confirm(yes: bool, question: str) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise UserError("refusing to change traffic without confirmation: pass --yes (stdin is not a terminal)")
    typer.confirm(question, abort=True)


def fmt_change(c: GlobalChange) -> str:
    """One global weight change: applied when, in effect everywhere when (or why not known)."""
    done = f"in effect {c.propagated_at:%H:%M:%S}" if c.propagated_at else "propagation not confirmed"
    text = f"{fmt_weights(c.weights)}: applied {c.applied_at:%H:%M:%S}, {done} ({c.propagation})"
    return f"{text}; {c.note}" if c.note else text


def _render_failover(res: FailoverResult, link: str) -> None:
    t = Table(title=f"failover {res.source or '?'} → {res.target}: {res.status}")
    t.add_column("")
    t.add_column("")
    t.add_row("weights", f"{fmt_weights(res.weights_before)} → {fmt_weights(res.weights_after or res.weights_before)}")
    if res.target_replicas is not None:
        t.add_row(f"{res.target} replicas", str(res.target_replicas))
    if res.plan is not None and res.plan.shortfall:
        t.add_row("capacity shortfall", f"needs {res.plan.target_replicas_needed} ({res.plan.sizing}); "
                                        f"max_replicas {res.plan.max_replicas}")
    if res.rto_s is not None:
        t.add_row("measured RTO", f"{res.rto_s:.2f} s (target {res.rto_target_s:g} s, {'met' if res.rto_met else 'MISSED'})")
    if res.verify:
        v = res.verify
        extra = f", {v.unattributed} without the `{v.region_header}` header" if v.unattributed else ""
        t.add_row("verify", f"{v.ok}/{v.total} ok, served by {v.by_region}{extra}")
    for c in res.changes:
        t.add_row("global change", fmt_change(c))
    for p in res.phases:
        t.add_row(f"phase {p.phase}", f"{p.duration_s:.2f} s" if p.duration_s is not None else "…")
    if res.preempted:
        t.add_row("preempted (DR first)", ", ".join(res.preempted))
    if res.data_loss:
        d = res.data_loss
        lag = "unknown" if d.lag_s is None else f"{d.lag_s:.1f} s"
        t.add_row("data-loss exposure", f"{lag}, {d.objects} object(s) (RPO {d.rpo_target_s:g} s)")
    if res.compensated:
        t.add_row("compensation", res.compensated)
    if res.error:
        t.add_row("error", res.error)
    console.print(t)
    console.print(f"UI: {link}")


def register(app: typer.Typer) -> None:
    @app.command("failover")
    def failover(
        to: Annotated[str, typer.Option("--to", help="Region that takes the traffic.")],
        config: ConfigOpt = Path(DEFAULT_CONFIG),
        from_: Annotated[str | None, typer.Option("--from", help="Region to drain; default every other region.")] = None,
        emergency: Annotated[bool, typer.Option("--emergency", help="Shift first, scale after.")] = False,
        force: Annotated[bool, typer.Option("--force", help="Override refusals: target health, capacity, replication lag over the RPO, model drift.")] = False,
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
        yes: Yes = False,
        no_wait: NoWait = False,
        output: OutputOpt = Output.table,
    ) -> None:
        """Move the fleet's traffic to one region, through the Failover workflow."""
        cfg = load(config)
        cfg.region(to)
        if from_:
            cfg.region(from_)
            if from_ == to:
                raise UserError(f"--from and --to are both {to}")
        if dry_run:
            plan = dry_run_plan(cfg, to, from_, emergency=emergency, force=force)
            if output is Output.json:
                print_json({"dry_run": True, "plan": plan.model_dump(mode="json")})
                return
            console.print(f"[bold]dry run[/] (nothing changed): failover {plan.source} → {to}")
            console.print(f"  global weights: {fmt_weights(plan.weights_before)} → {fmt_weights(plan.weights_after)}")
            console.print(f"  {to} replicas: {plan.target_replicas_before} → {plan.target_replicas_planned} "
                          f"(needed {plan.target_replicas_needed}: {plan.sizing}; max {plan.max_replicas})")
            if plan.shortfall:
                console.print(f"  [yellow]capacity shortfall:[/] {plan.shortfall} replica(s) short of the need")
            for p in plan.problems:
                console.print(f"  [red]would refuse:[/] {p}")
            return
        _confirm(yes, f"Move all traffic of fleet {cfg.name!r} to {to}?")
        inp = FailoverInput(spec=FleetSpec.from_config(cfg), target=to, source=from_, emergency=emergency, force=force)
        done, link = run_async(lambda: _run_failover(cfg, inp, no_wait, output))
        if done is None:
            return
        res = done.result
        if output is Output.json:
            print_json({"workflow_id": f"failover/{cfg.name}", "ui_link": link, "result": res.model_dump(mode="json")})
        else:
            _render_failover(res, link)
        raise typer.Exit(exit_code(done))

    @app.command("failback")
    def failback(
        config: ConfigOpt = Path(DEFAULT_CONFIG),
        region: Annotated[str | None, typer.Option("--region", help="The recovered region (default: any below its weight).")] = None,
        yes: Yes = False,
        no_wait: NoWait = False,
        output: OutputOpt = Output.table,
    ) -> None:
        """Return traffic to the configured weights in steps, checking health at each step."""
        cfg = load(config)
        if region:
            cfg.region(region)
        _confirm(yes, f"Return fleet {cfg.name!r} to its configured weights {cfg.weights}?")
        inp = FailbackInput(spec=FleetSpec.from_config(cfg), region=region)

        async def go() -> tuple[Finished[FailbackResult] | None, str]:
            from workflows.failback import Failback

            client = await connect(cfg)
            wid = f"failback/{cfg.name}"
            handle = await start_operation(client, cfg, Failback.run, inp, operation="failback", workflow_id=wid,
                                           target=region)
            link = ui_link(cfg, wid, handle.result_run_id)
            err_console.print(f"failback started: {link}")
            if no_wait:
                return None, link
            return await watch(handle, FailbackResult, show=output is Output.table), link

        done, link = run_async(go)
        if done is None:
            return
        res = done.result
        if output is Output.json:
            print_json({"ui_link": link, "result": res.model_dump(mode="json")})
        else:
            console.print(f"failback {res.status}: {fmt_weights(res.weights_before)} → {fmt_weights(res.weights_after)}; "
                          f"steps {res.steps_done}/{res.steps_planned}; scaled back {res.scaled_back or '-'}")
            for c in res.changes:
                console.print(f"  global change {fmt_change(c)}")
            if res.error:
                console.print(f"error: {res.error}")
            console.print(f"UI: {link}")
        raise typer.Exit(exit_code(done))

    _register_monitor(app)


async def _run_failover(cfg: FleetConfig, inp: FailoverInput, no_wait: bool, output: Output
                        ) -> tuple[Finished[FailoverResult] | None, str]:
    from workflows.failover import Failover

    client = await connect(cfg)
    wid = f"failover/{cfg.name}"
    handle = await start_operation(client, cfg, Failover.run, inp, operation="failover", workflow_id=wid,
                                   source=inp.source, target=inp.target, memo={"initiator": "cli"})
    link = ui_link(cfg, wid, handle.result_run_id)
    err_console.print(f"failover started: {link}")
    if no_wait:
        if output is Output.json:
            print_json({"workflow_id": wid, "run_id": handle.result_run_id, "ui_link": link})
        return None, link
    return await watch(handle, FailoverResult, show=output is Output.table), link


def _monitor_id(cfg: FleetConfig) -> str:
    return f"monitor/{cfg.name}"


async def start_monitor(client: Client, cfg: FleetConfig) -> tuple[WorkflowHandle[Any, Any], bool]:
    """Start the fleet's monitor unless it runs; returns (handle, started)."""
    from workflows.monitor import FleetMonitor

    wid = _monitor_id(cfg)
    try:
        desc = await client.get_workflow_handle(wid).describe()
        if desc.status and desc.status.name == "RUNNING":
            return client.get_workflow_handle(wid), False
    except RPCError:
        pass
    attrs = TypedSearchAttributes([SearchAttributePair(sa.FLEET, cfg.name), SearchAttributePair(sa.OPERATION, "monitor"),
                                   SearchAttributePair(sa.PHASE, "watching")])
    handle = await client.start_workflow(
        FleetMonitor.run, MonitorInput(spec=FleetSpec.from_config(cfg)), id=wid, task_queue=cfg.temporal.task_queue,
        search_attributes=attrs, memo={"fleet": cfg.name}, id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    return handle, True


async def update_monitor(handle: WorkflowHandle[Any, Any], cfg: FleetConfig) -> list[str]:
    """Make a running monitor follow `cfg` (weights, regions, thresholds, policy); returns the changes.

    Applied by the monitor between probe rounds; regions in both configs keep their state.
    """
    from temporalio.client import WorkflowUpdateFailedError

    from drctl.models.monitor_config import SpecUpdate

    try:
        return await handle.execute_update("update_spec", SpecUpdate(spec=FleetSpec.from_config(cfg)),
                                           result_type=list[str])
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause.message if exc.cause is not None and hasattr(exc.cause, "message") else str(exc)
        raise UserError(f"monitor {handle.id} refused the config {cfg.source_path or ''}: {cause}") from None


async def monitor_status(client: Client, cfg: FleetConfig) -> MonitorStatus | None:
    """The running monitor's status; None when no monitor runs.

    A closed run still answers queries with its last state, so a stopped monitor would otherwise
    show as running (in `drctl status` too): ask whether it runs first.
    """
    handle = client.get_workflow_handle(_monitor_id(cfg))
    try:
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            return None
        # Bounded: a running monitor whose workers are all gone cannot answer, and `drctl status`
        # at 3 a.m. must still print the rest of the fleet.
        return await handle.query("status", result_type=MonitorStatus, rpc_timeout=timedelta(seconds=5))
    except RPCError:
        return None


def _register_monitor(app: typer.Typer) -> None:
    mon = typer.Typer(help="The fleet's health monitor workflow (monitor/<fleet>).", no_args_is_help=True)
    app.add_typer(mon, name="monitor")

    @mon.command("start")
    def start(config: ConfigOpt = Path(DEFAULT_CONFIG)) -> None:
        """Start watching every region; a running monitor is updated to follow this config."""
        cfg = load(config)

        async def go() -> tuple[str, bool, list[str]]:
            handle, started = await start_monitor(await connect(cfg), cfg)
            changes = [] if started else await update_monitor(handle, cfg)
            return ui_link(cfg, handle.id), started, changes

        link, started, changes = run_async(go)
        if started:
            console.print(f"monitor started: {link}")
        elif changes:
            console.print(f"monitor already running; updated to follow {cfg.source_path or 'the config'}: {link}")
            for c in changes:
                console.print(f"  {c}")
        else:
            console.print(f"monitor already running; it follows this config already: {link}")

    @mon.command("stop")
    def stop(config: ConfigOpt = Path(DEFAULT_CONFIG)) -> None:
        """Stop the monitor (a failover it started keeps running)."""
        cfg = load(config)

        async def go() -> None:
            try:
                await (await connect(cfg)).get_workflow_handle(_monitor_id(cfg)).cancel()
            except RPCError as exc:
                raise UserError(f"monitor {_monitor_id(cfg)} is not running ({exc.message})") from None

        run_async(go)
        console.print(f"monitor {_monitor_id(cfg)} stopping")

    @mon.command("status")
    def status(config: ConfigOpt = Path(DEFAULT_CONFIG), output: OutputOpt = Output.table) -> None:
        """The monitor's view: per-region state, policy, alert."""
        cfg = load(config)
        st = run_async(lambda: _status(cfg))
        if st is None:
            raise UserError(f"monitor {_monitor_id(cfg)} is not running; start it with `drctl monitor start`", 1)
        if output is Output.json:
            print_json(st.model_dump(mode="json"))
            return
        if st.alert:
            console.print(f"[bold red]ALERT {st.alert}[/]")
        for why in st.unresolved.values():
            console.print(f"[red]not probed:[/] {why}")
        t = Table(title=f"monitor {cfg.name}: policy {st.policy}{' (paused)' if st.paused else ''}, round {st.iteration}")
        for col in ("region", "state", "fails", "oks", "last probe", "ttft p50 ms"):
            t.add_column(col)
        for r in st.regions.values():
            t.add_row(r.region, r.state.value, str(r.consecutive_failures), str(r.consecutive_successes),
                      f"{r.last_status.value if r.last_status else '-'} {r.last_reason}",
                      f"{r.last_ttft_ms:.0f}" if r.last_ttft_ms is not None else "-")
        console.print(t)


async def _status(cfg: FleetConfig) -> MonitorStatus | None:
    return await monitor_status(await connect(cfg), cfg)
