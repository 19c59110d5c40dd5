"""`drctl failover` (and its `--dry-run` plan) and `drctl failback`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from drctl.cli import common, complete
from drctl.cli.operation import RunOptions, run_options

# The models, the workflows and the Temporal client load when the command runs: -h and Tab
# completion read only the signatures below (bench/cli_latency.py).
if TYPE_CHECKING:
    from rich.table import Table

    from drctl.config.schema import FleetConfig
    from drctl.models.failover import FailbackResult, FailoverInput, FailoverPlan, FailoverResult
    from drctl.models.traffic import GlobalChange


def fmt_weights(weights: dict[str, Any]) -> str:
    from workflows.common import fmt_weights as fmt

    return fmt(weights)


app = typer.Typer()


def dry_run_plan(cfg: FleetConfig, inp: FailoverInput) -> FailoverPlan:
    """The plan the workflow would follow, made by its own preflight on the workers; changes nothing.

    FleetRead runs the Failover's preflight reads on the target's queue and its planner
    (`workflows.failover_phases.plan_preflight`), so the plan cannot drift from the real one.
    """
    from drctl.cli import reads
    from drctl.models.failover import FailoverPlan

    res = reads.ask(cfg, "failover_plan", regions=[inp.target], failover=inp)
    return reads.value_of(res, f"plan/{inp.target}", FailoverPlan)


def _print_plan(plan: FailoverPlan, output: common.Output) -> None:
    if common.printed_json(output, {"dry_run": True, "plan": plan.model_dump(mode="json")}):
        return
    to = plan.target
    common.console.print(f"[bold]dry run[/] (nothing changed): failover {plan.source} → {to}")
    common.console.print(
        f"  global weights: {fmt_weights(plan.weights_before)} → {fmt_weights(plan.weights_after)}"
    )
    common.console.print(
        f"  {to} replicas: {plan.target_replicas_before} → {plan.target_replicas_planned} "
        f"(needed {plan.target_replicas_needed}: {plan.sizing}; max {plan.max_replicas})"
    )
    if plan.shortfall:
        common.console.print(
            f"  [yellow]capacity shortfall:[/] {plan.shortfall} replica(s) short of the need"
        )
    for p in plan.problems:
        common.console.print(f"  [red]would refuse:[/] {p}")


def fmt_change(c: GlobalChange) -> str:
    """One global weight change: applied when, in effect everywhere when (or why not known)."""
    done = f"in effect {c.propagated_at:%H:%M:%S}" if c.propagated_at else "propagation not confirmed"
    text = f"{fmt_weights(c.weights)}: applied {c.applied_at:%H:%M:%S}, {done} ({c.propagation})"
    return f"{text}; {c.note}" if c.note else text


def _outcome_rows(t: Table, res: FailoverResult) -> None:
    """What the failover measured and left behind: RTO, verification, changes, phases, data loss."""
    from drctl.cli.gitops import gitops_rows

    if res.rto_s is not None:
        t.add_row(
            "measured RTO",
            f"{res.rto_s:.2f} s (target {res.rto_target_s:g} s, {'met' if res.rto_met else 'MISSED'})",
        )
    if res.slo_evidence is not None:
        t.add_row("SLO restored", res.slo_evidence)  # "restored 7.2s after the fault: ..." or why not
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
    for row in gitops_rows(res.gitops_managed):
        t.add_row(*row)
    if res.data_loss:
        d = res.data_loss
        lag = "unknown" if d.lag_s is None else f"{d.lag_s:.1f} s"
        t.add_row("data-loss exposure", f"{lag}, {d.objects} object(s) (RPO {d.rpo_target_s:g} s)")


def render_failover(res: FailoverResult, link: str) -> None:
    from rich.table import Table

    t = Table(title=f"failover {res.source or '?'} → {res.target}: {res.status}")
    t.add_column("", overflow="fold")
    t.add_column("", overflow="fold")
    t.add_row(
        "weights",
        f"{fmt_weights(res.weights_before)} → {fmt_weights(res.weights_after or res.weights_before)}",
    )
    if res.target_replicas is not None:
        t.add_row(f"{res.target} replicas", str(res.target_replicas))
    for region, scaled in res.receivers_scaled.items():  # a spread's other receivers
        t.add_row(
            f"{region} replicas", f"not scaled: {scaled.error}" if scaled.error else str(scaled.replicas)
        )
    if res.plan is not None and res.plan.shortfall:
        t.add_row(
            "capacity shortfall",
            f"needs {res.plan.target_replicas_needed} ({res.plan.sizing}); "
            f"max_replicas {res.plan.max_replicas}",
        )
    _outcome_rows(t, res)
    if res.compensated:
        t.add_row("compensation", res.compensated)
    if res.error:
        t.add_row("error", res.error)
    common.console.print(t)
    common.console.print(f"UI: {link}")


def render_failback(res: FailbackResult, link: str) -> None:
    from drctl.cli.gitops import gitops_rows

    common.console.print(
        f"failback {res.status}: {fmt_weights(res.weights_before)} → {fmt_weights(res.weights_after)}; "
        f"steps {res.steps_done}/{res.steps_planned}; scaled back {res.scaled_back or '-'}"
    )
    for c in res.changes:
        common.console.print(f"  global change {fmt_change(c)}")
    for label, text in gitops_rows(res.gitops_managed):
        common.console.print(f"  {label} {text}", markup=False, highlight=False)
    if res.error:
        common.console.print(f"error: {res.error}")
    common.console.print(f"UI: {link}")


@app.command("failover")
@run_options()
def failover(
    to: Annotated[
        str, typer.Option("--to", help="Region that takes the traffic.", autocompletion=complete.regions)
    ],
    config: common.ConfigOpt = common.CONFIG,
    from_: Annotated[
        str | None,
        typer.Option(
            "--from", help="Region to drain; default every other region.", autocompletion=complete.regions
        ),
    ] = None,
    emergency: Annotated[bool, typer.Option("--emergency", help="Shift first, scale after.")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Override refusals: target health, capacity, replication lag over the RPO, model drift.",
        ),
    ] = False,
    break_glass: Annotated[
        bool,
        typer.Option(
            "--break-glass",
            help="Temporal is unreachable: run preflight and shift in this process, from a host that "
            "reaches the global tier, and leave an audit record to import later (refused while Temporal "
            "answers, unless --force).",
        ),
    ] = False,
    *,
    run: RunOptions,
) -> None:
    """Move the fleet's traffic to one region, through the Failover workflow."""
    from drctl.models.failover import FailoverInput, FailoverResult
    from drctl.models.fleet_spec import FleetSpec

    cfg = common.load(config)
    cfg.region(to)
    if from_:
        cfg.region(from_)
        if from_ == to:
            raise common.UserError(f"--from and --to are both {to}")
    if break_glass:
        from drctl.cli.breakglass import break_glass as run_break_glass

        run_break_glass(
            cfg, config, to, from_, emergency=emergency, force=force, yes=run.yes, dry_run=run.dry_run
        )
        return
    inp = FailoverInput(
        spec=FleetSpec.from_config(cfg), target=to, source=from_, emergency=emergency, force=force
    )
    if run.dry_run:
        _print_plan(dry_run_plan(cfg, inp), run.output)
        return
    common.confirm(run.yes, f"Move all traffic of fleet {cfg.name!r} to {to}?", "change traffic")
    from workflows.failover import Failover

    run.operate(
        cfg,
        "failover",
        Failover.run,
        inp,
        FailoverResult,
        render_failover,
        operation="failover",
        workflow_id=f"failover/{cfg.name}",
        source=from_,
        target=to,
    )


@app.command("failback")
@run_options()
def failback(
    config: common.ConfigOpt = common.CONFIG,
    region: Annotated[
        str | None,
        typer.Option(
            "--region",
            help="The recovered region (default: any below its weight).",
            autocompletion=complete.regions,
        ),
    ] = None,
    *,
    run: RunOptions,
) -> None:
    """Return traffic to the configured weights in steps, checking health at each step."""
    from drctl.models.failover import FailbackInput, FailbackResult
    from drctl.models.fleet_spec import FleetSpec

    cfg = common.load(config)
    if region:
        cfg.region(region)
    inp = FailbackInput(spec=FleetSpec.from_config(cfg), region=region)
    if run.dry_run:
        spec = inp.spec
        rows = [
            ("to weights", fmt_weights(spec.weights)),
            ("from weights", "the global tier's current ones, read by the workflow as it starts"),
            (
                "stabilisation",
                f"{region or 'each region gaining traffic'} healthy for {spec.stabilization_window_s:g} s",
            ),
            ("steps", f"{spec.failback_steps}, each probed; a regression rolls back one step and ends it"),
        ]
        common.print_plan(run.output, f"failback of fleet {cfg.name}", f"failback/{cfg.name}", inp, rows)
        return
    common.confirm(
        run.yes, f"Return fleet {cfg.name!r} to its configured weights {cfg.weights}?", "change traffic"
    )
    from workflows.failback import Failback

    run.operate(
        cfg,
        "failback",
        Failback.run,
        inp,
        FailbackResult,
        render_failback,
        operation="failback",
        workflow_id=f"failback/{cfg.name}",
        target=region,
    )
