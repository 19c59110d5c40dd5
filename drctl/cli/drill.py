"""`drctl drill`: run, dry-run, history, report, and the weekly schedule of chaos drills."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from drctl.cli import common, complete, drill_schedule, reads
from drctl.cli.lazy import Lazy
from drctl.cli.operation import RunOptions, run_options
from drctl.models.safe_text import safe_text

# Loaded where a command runs, not for -h or Tab completion (drctl/cli/lazy.py).
if TYPE_CHECKING:
    import drctl.chaos.validate as _chaos_validate
    import drctl.cli.launch as _cli_launch
    import drctl.config.schema as _config_schema
    import drctl.models.drill as _models_drill
    import drctl.models.reads as _models_reads
else:
    _chaos_validate = Lazy("drctl.chaos.validate")
    _cli_launch = Lazy("drctl.cli.launch")
    _config_schema = Lazy("drctl.config.schema")
    _models_drill = Lazy("drctl.models.drill")
    _models_reads = Lazy("drctl.models.reads")

app = typer.Typer(name="drill", help="Chaos drills that measure the real RTO.", no_args_is_help=True)
app.add_typer(drill_schedule.app)

TargetOpt = Annotated[
    str | None, typer.Option("--target", help="Region to hurt (default: the experiment's).")
]


def _print_plan(cfg: _config_schema.FleetConfig, plan: _models_drill.ExperimentPlan) -> None:
    common.console.print(
        f"[bold]Drill plan[/bold] (dry run: nothing is injected) for fleet [cyan]{cfg.name}[/cyan]"
    )
    rows = [
        ("experiment", f"{plan.name}: {plan.title}"),
        ("target region", plan.target_region),
        ("fault injector", cfg.drills.fault_injector),
        ("steady-state probes", ", ".join(plan.probes)),
        ("fault actions", ", ".join(plan.fault_actions)),
        ("rollbacks", ", ".join(plan.rollbacks)),
        ("expects failover", "yes" if plan.expect_failover else "no (a failover fails the drill)"),
        ("RTO target", f"{cfg.objectives.rto_target_s:g} s"),
        ("load", f"{cfg.drills.load_rps:g} req/s through {cfg.traffic.global_endpoint}"),
        ("allowed targets", ", ".join(cfg.drills.allowed_targets)),
    ]
    for k, v in rows:
        common.console.print(f"  {k:<20} {safe_text(v)}", markup=False, highlight=False)


def render_report(r: _models_drill.DrillReport, link: str) -> None:
    color = {"PASS": "green", "FAILED": "red", "ABORTED": "yellow"}[r.verdict.value]
    common.console.print(f"[bold {color}]{r.verdict.value}[/bold {color}] {r.id}")
    rto = f"{r.measured_rto_s:.1f} s" if r.measured_rto_s is not None else "n/a"
    common.console.print(
        f"  measured RTO {rto} (target {r.rto_target_s:g} s); error window {r.error_window_s:.1f} s; "
        f"{r.errors}/{r.requests} requests failed",
        markup=False,
        highlight=False,
    )
    if r.slo_evidence and r.verdict.value == "PASS":  # otherwise it is among the reasons
        common.console.print(f"  SLO {r.slo_evidence}", markup=False, highlight=False)
    for why in r.reasons:
        common.console.print(f"  - {safe_text(why)}", markup=False, highlight=False)
    common.console.print(f"UI: {link}", markup=False, highlight=False)


@app.command("run")
@run_options(
    dry_run=Annotated[bool, typer.Option("--dry-run", help="Validate and print the plan; inject nothing.")]
)
def run_cmd(
    experiment: Annotated[Path, typer.Argument(help="Chaos Toolkit experiment (JSON or YAML).")],
    config: common.ConfigOpt = common.CONFIG,
    target: TargetOpt = None,
    *,
    run: RunOptions,
) -> None:
    """Run a drill now. Exits 0 only on PASS; 2 for an invalid experiment."""
    cfg = common.load(config)
    plan = _chaos_validate.validate_experiment(experiment, cfg, target)
    if run.dry_run:
        if not common.printed_json(run.output, plan.model_dump(mode="json", exclude={"text"})):
            _print_plan(cfg, plan)
        return
    # A drill injects a real fault into a region: it moves traffic, so it is confirmed like a failover.
    common.confirm(
        run.yes,
        f"Inject {plan.name} into {plan.target_region} of fleet {cfg.name!r} (traffic will move)?",
        f"inject a fault into {plan.target_region}",
    )
    wid = f"drill/{cfg.name}/{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}"
    # A drill that did not PASS ends Failed; its report is in the failure's details.
    run.operate(
        cfg,
        f"drill of {plan.name} against {plan.target_region}",
        "ChaosDrill",
        _models_drill.DrillInput.from_config(cfg, plan),
        _models_drill.DrillReport,
        render_report,
        operation="drill",
        workflow_id=wid,
        target=plan.target_region,
        as_json=_cli_launch.result_only,
    )


@app.command("validate")
def validate_cmd(
    experiment: Annotated[Path, typer.Argument(help="Chaos Toolkit experiment (JSON or YAML).")],
    config: common.ConfigOpt = Path("config/fleet.yaml"),
    target: TargetOpt = None,
    output: common.OutputOpt = common.Output.table,
) -> None:
    """Judge an experiment as the worker will; exit 2 naming the problem. Same as `run --dry-run`."""
    run_cmd(experiment, config, target, dry_run=True, output=output)


def _trend(reports: list[_models_drill.DrillReport]) -> dict[str, str]:
    """Per report id: its RTO against the previous drill of the same experiment."""
    out: dict[str, str] = {}
    last: dict[str, float] = {}
    for r in sorted(reports, key=lambda r: r.started_at):
        prev = last.get(r.experiment)
        if r.measured_rto_s is None:
            out[r.id] = ""
            continue
        if prev is None:
            out[r.id] = "first"
        else:
            delta = r.measured_rto_s - prev
            out[r.id] = "=" if abs(delta) < 0.05 else (f"↑ +{delta:.1f}s" if delta > 0 else f"↓ {delta:.1f}s")
        last[r.experiment] = r.measured_rto_s
    return out


def _loss(r: _models_drill.DrillReport) -> str:
    if r.data_loss_objects is None:
        return "-"
    return (
        f"{r.data_loss_s:.1f}s/{r.data_loss_objects}"
        if r.data_loss_s is not None
        else f"?/{r.data_loss_objects}"
    )


@app.command("history")
def history_cmd(
    config: common.ConfigOpt = common.CONFIG, limit: int = 20, output: common.OutputOpt = common.TABLE
) -> None:
    """Past drills: date, experiment, verdict, measured RTO against target, trend."""
    cfg = common.load(config)
    res = reads.ask(cfg, "drill_history", regions=[], limit=limit)
    reports = reads.value_of(res, "drill_history", _models_reads.DrillHistory).reports
    if common.printed_json(output, [r.model_dump(mode="json", exclude={"journal"}) for r in reports]):
        return
    trend = _trend(reports)
    table = Table(title=f"Drills of fleet {cfg.name}")
    for col in (
        "date",
        "experiment",
        "target",
        "verdict",
        "RTO / target",
        "error window",
        "data loss",
        "trend",
        "id",
    ):
        table.add_column(col, overflow="fold")
    for r in reports:
        rto = f"{r.measured_rto_s:.1f}s" if r.measured_rto_s is not None else "-"
        table.add_row(
            r.started_at.strftime("%Y-%m-%d %H:%M"),
            common.shown(r.experiment),
            common.shown(r.target_region),
            r.verdict.value,
            f"{rto} / {r.rto_target_s:g}s",
            f"{r.error_window_s:.1f}s",
            _loss(r),
            trend.get(r.id, ""),
            r.id,
        )
    common.console.print(table)  # piped: never cut (common.console)


@app.command("report")
def report_cmd(
    drill_id: Annotated[
        str, typer.Argument(help="drill/<fleet>/<ts>", autocompletion=complete.operation_ids)
    ],
    config: common.ConfigOpt = common.CONFIG,
    output: common.OutputOpt = common.TABLE,
) -> None:
    """One drill's full report (markdown, or JSON with --output json)."""
    cfg = common.load(config)
    res = reads.ask(cfg, "drill_report", regions=[], name=drill_id)
    got = reads.value_of(
        res, "drill_report", _models_reads.DrillReportText, f"no report for {drill_id} in the drill history"
    )
    if common.is_document(output):
        common.print_json(got.report.model_dump(mode="json"), output)
    else:
        common.console.print(got.markdown, markup=False, highlight=False)
