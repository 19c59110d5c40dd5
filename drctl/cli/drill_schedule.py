"""`drctl drill schedule`: weekly drills on Temporal Schedules (overlap policy SKIP).

`drctl drill schedule --cron "0 3 * * MON" --jitter 30m -e experiments/region-outage.json` creates
(or replaces) the schedule; `list`, `pause`, `resume`, `delete` and `trigger` manage it. With several
`-e`, each run picks one of them at random.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from drctl.cli.common import (
    CONFIG,
    TABLE,
    ConfigOpt,
    DryRunOpt,
    Output,
    OutputOpt,
    UserError,
    YesOpt,
    confirm,
    console,
    is_document,
    load,
    print_json,
    print_plan,
    printed_json,
    run_async,
)
from drctl.cli.durations import delta, go_duration
from drctl.cli.lazy import Lazy

# Loaded where a command runs, not for -h or Tab completion (drctl/cli/lazy.py).
if TYPE_CHECKING:
    import temporalio.client as _temporalio_client
    import temporalio.service as _temporalio_service

    import drctl.chaos.validate as _chaos_validate
    import drctl.client.connection as _client_connection
    import drctl.client.operations as _client_operations
    import drctl.config.schema as _config_schema
    import drctl.models.drill as _models_drill
else:
    _temporalio_client = Lazy("temporalio.client")
    _temporalio_service = Lazy("temporalio.service")
    _chaos_validate = Lazy("drctl.chaos.validate")
    _client_connection = Lazy("drctl.client.connection")
    _client_operations = Lazy("drctl.client.operations")
    _config_schema = Lazy("drctl.config.schema")
    _models_drill = Lazy("drctl.models.drill")

app = typer.Typer(name="schedule", help="Weekly drills on Temporal Schedules.", invoke_without_command=True)

NameOpt = Annotated[str, typer.Option("--name", help="Schedule name; one fleet can have several.")]


def schedule_id(cfg: _config_schema.FleetConfig, name: str) -> str:
    return _models_drill.drill_schedule_id(cfg.name, name)


_CRON_NAMES = r"\b(JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC|SUN|MON|TUE|WED|THU|FRI|SAT)\b"


def _cron(expr: str) -> str:
    from croniter import croniter

    fields = expr.split()
    if len(fields) != 5:
        raise UserError(f"--cron {expr!r}: expected 5 fields (minute hour day-of-month month day-of-week)")
    # The right number of fields is not a schedule: "61 25 * * *" or "0 3 31 2 *" never fire.
    # Plain fields only (numbers, names, * , - /): croniter's extensions (L, W, #, H) are not
    # what the Temporal server's parser takes.
    plain = re.sub(_CRON_NAMES, "0", expr.upper())
    if not re.fullmatch(r"[0-9*,/\- ]+", plain) or not croniter.is_valid(expr):
        raise UserError(
            f"--cron {expr!r}: not a valid cron expression (minute 0-59, hour 0-23, day 1-31, "
            "month 1-12 or JAN-DEC, weekday 0-6 or SUN-SAT)"
        )
    try:
        croniter(expr).get_next(float)
    except Exception:  # noqa: BLE001 - croniter raises several types for a date that never comes
        raise UserError(f"--cron {expr!r}: matches no date (e.g. day 31 of a 30-day month)") from None
    return " ".join(fields)


@app.callback()
def schedule_cmd(
    ctx: typer.Context,
    cron: Annotated[
        str | None, typer.Option("--cron", help='Cron expression, UTC, e.g. "0 3 * * MON".')
    ] = None,
    jitter: Annotated[
        timedelta | None,
        typer.Option(
            "--jitter", parser=delta("--jitter"), metavar="DURATION", help="Random delay per run, e.g. 30m."
        ),
    ] = None,
    experiment: Annotated[
        list[Path] | None,
        typer.Option("--experiment", "-e", help="Experiment file; repeat to pick at random."),
    ] = None,
    target: Annotated[
        str | None, typer.Option("--target", help="Region to hurt (default: each experiment's).")
    ] = None,
    name: NameOpt = "weekly",
    config: ConfigOpt = CONFIG,
    dry_run: DryRunOpt = False,
    yes: YesOpt = False,
    output: OutputOpt = TABLE,
) -> None:
    """Create or replace a drill schedule (with --cron), or manage schedules with a subcommand."""
    if ctx.invoked_subcommand is not None:
        return
    if cron is None:
        raise UserError(
            "give --cron to create a schedule, or a subcommand: list, pause, resume, delete, trigger"
        )
    if not experiment:
        raise UserError("give at least one --experiment file")
    if len(experiment) > _models_drill.MAX_ALTERNATIVES + 1:
        raise UserError(
            f"--experiment: at most {_models_drill.MAX_ALTERNATIVES + 1} files, not {len(experiment)}"
        )
    cfg = load(config)
    plans = [
        _chaos_validate.validate_experiment(p, cfg, target) for p in experiment
    ]  # every file is validated before scheduling
    spec = _temporalio_client.ScheduleSpec(cron_expressions=[_cron(cron)], jitter=jitter)
    jitter_text = go_duration(jitter) if jitter else None
    sid = schedule_id(cfg, name)
    drill_input = _models_drill.DrillInput.from_config(cfg, plans[0], plans[1:])
    if dry_run:
        plan = {
            "schedule_id": sid,
            "cron": cron,
            "jitter": jitter_text,
            "input": drill_input.model_dump(mode="json"),
        }
        rows = [
            ("schedule", f"{sid} (replaced if it exists)"),
            ("cron (UTC)", cron + (f" ±{jitter_text}" if jitter_text else "")),
            ("experiments", ", ".join(f"{p.name} → {p.target_region}" for p in plans)),
            ("overlap", "skip a run while a drill runs"),
        ]
        print_plan(output, f"drill schedule {sid}", f"drill/{cfg.name}/{name}", plan, rows)
        return
    # A schedule injects real faults on its own from now on, and replaces one of the same name.
    confirm(
        yes,
        f"Schedule drills ({', '.join(p.name for p in plans)}) on fleet {cfg.name!r} at {cron!r} UTC, "
        f"replacing schedule {sid} if it exists?",
        f"create or replace drill schedule {sid}",
    )
    action = _temporalio_client.ScheduleActionStartWorkflow(
        "ChaosDrill",
        drill_input,
        id=f"drill/{cfg.name}/{name}",
        task_queue=cfg.temporal.task_queue,
    )
    schedule = _temporalio_client.Schedule(
        action=action,
        spec=spec,
        policy=_temporalio_client.SchedulePolicy(overlap=_temporalio_client.ScheduleOverlapPolicy.SKIP),
        state=_temporalio_client.ScheduleState(note=f"drills: {', '.join(p.name for p in plans)}"),
    )

    async def go() -> list[str]:
        client = await _client_connection.connect(cfg)
        # Each drill it starts records who created the schedule (Temporal records no starter for them).
        by = f"schedule {sid} by {client.identity}"
        action.typed_search_attributes = _client_operations.search_attributes(cfg.name, "drill", initiator=by)
        action.memo = {"fleet": cfg.name, "operation": "drill", "initiator": by}
        try:
            handle = await client.create_schedule(sid, schedule)
        except _temporalio_client.ScheduleAlreadyRunningError:
            handle = client.get_schedule_handle(sid)
            await handle.update(lambda _: _temporalio_client.ScheduleUpdate(schedule=schedule))
        desc = await handle.describe()
        return [t.isoformat() for t in desc.info.next_action_times[:3]]

    nxt = run_async(go)
    if printed_json(output, {"schedule_id": sid, "cron": cron, "jitter": jitter_text, "next_runs": nxt}):
        return
    console.print(
        f"schedule {sid}: {cron}"
        + (f" ±{jitter_text}" if jitter_text else "")
        + f"; next runs {', '.join(nxt)}",
        markup=False,
        highlight=False,
    )


@app.command("list")
def list_cmd(config: ConfigOpt = CONFIG, output: OutputOpt = TABLE) -> None:
    """Drill schedules of this fleet with their next run times."""
    cfg = load(config)
    prefix = schedule_id(cfg, "")

    async def go() -> list[dict[str, object]]:
        client = await _client_connection.connect(cfg)
        rows: list[dict[str, object]] = []
        async for entry in await client.list_schedules():
            if not entry.id.startswith(prefix):
                continue
            desc = await client.get_schedule_handle(entry.id).describe()
            spec = desc.schedule.spec
            rows.append(
                {
                    "id": entry.id,
                    "cron": ", ".join(spec.cron_expressions) or _calendar_text(spec),
                    "jitter": str(spec.jitter) if spec.jitter else "",
                    "paused": desc.schedule.state.paused,
                    "note": desc.schedule.state.note or "",
                    "next_runs": [t.isoformat() for t in desc.info.next_action_times[:5]],
                }
            )
        return rows

    rows = run_async(go)
    if is_document(output):
        print_json(rows, output)
        return
    table = Table(title=f"Drill schedules of fleet {cfg.name}")
    for col in ("id", "schedule", "jitter", "state", "next runs"):
        table.add_column(col, overflow="fold")
    for r in rows:
        next_runs = r["next_runs"]
        runs = "\n".join(str(t) for t in next_runs) if isinstance(next_runs, list) else ""
        table.add_row(
            str(r["id"]), str(r["cron"]), str(r["jitter"]), "paused" if r["paused"] else "active", runs
        )
    console.print(table)  # piped: never cut (common.console)


_FULL = {"minute": (0, 59), "hour": (0, 23), "day_of_month": (1, 31), "month": (1, 12), "day_of_week": (0, 6)}
_DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]


def _calendar_text(spec: _temporalio_client.ScheduleSpec) -> str:
    """The server stores a cron expression as calendar specs; render them back as cron fields."""

    def field(name: str, ranges: Sequence[_temporalio_client.ScheduleRange]) -> str:
        lo, hi = _FULL[name]
        if not ranges or (
            len(ranges) == 1
            and (ranges[0].start, ranges[0].end or ranges[0].start) == (lo, hi)
            and ranges[0].step in (0, 1)
        ):
            return "*"
        parts = []
        for r in ranges:
            end = max(r.end, r.start)
            name_of = (lambda v: _DAYS[v % 7]) if name == "day_of_week" else str
            text = name_of(r.start) if end == r.start else f"{name_of(r.start)}-{name_of(end)}"
            parts.append(text + (f"/{r.step}" if r.step > 1 else ""))
        return ",".join(parts)

    return "; ".join(" ".join(field(n, getattr(c, n)) for n in _FULL) for c in spec.calendars)


# Each schedule subcommand: its help, and what it does to the schedule.
_SCHEDULE_OPS: dict[str, tuple[str, Callable[[_temporalio_client.ScheduleHandle], Awaitable[None]]]] = {
    "pause": ("Pause a drill schedule.", lambda h: h.pause(note="paused with drctl")),
    "resume": ("Resume a paused drill schedule.", lambda h: h.unpause(note="resumed with drctl")),
    "delete": ("Delete a drill schedule.", lambda h: h.delete()),
    "trigger": (
        "Run a scheduled drill now (skipped if one is already running).",
        lambda h: h.trigger(overlap=_temporalio_client.ScheduleOverlapPolicy.SKIP),
    ),
}


def _handle_op(config: Path | None, name: str, op: str, output: Output) -> None:
    cfg = load(config)
    sid = schedule_id(cfg, name)

    async def go() -> None:
        handle = (await _client_connection.connect(cfg)).get_schedule_handle(sid)
        try:
            await _SCHEDULE_OPS[op][1](handle)
        except _temporalio_service.RPCError as exc:
            if exc.status == _temporalio_service.RPCStatusCode.NOT_FOUND:
                raise UserError(f"no drill schedule {sid} (see `drctl drill schedule list`)") from None
            raise

    run_async(go)
    done = f"{op}{'d' if op.endswith('e') else 'ed'}"
    if not printed_json(output, {"schedule_id": sid, "done": done}):
        console.print(f"schedule {sid}: {done}", markup=False, highlight=False)


# What `delete` and `trigger` do cannot be undone (a schedule gone; a fault injected now): asked first.
_CONFIRM = {"delete": "delete drill schedule {sid}?", "trigger": "run a drill of schedule {sid} now?"}


def _op_command(op: str) -> Callable[..., None]:
    def command(name: NameOpt = "weekly", config: ConfigOpt = CONFIG, output: OutputOpt = TABLE) -> None:
        _handle_op(config, name, op, output)

    def confirmed(
        name: NameOpt = "weekly",
        config: ConfigOpt = CONFIG,
        dry_run: DryRunOpt = False,
        yes: YesOpt = False,
        output: OutputOpt = TABLE,
    ) -> None:
        sid = schedule_id(load(config), name)
        if dry_run:
            print_plan(output, f"{op} {sid}", None, {"schedule_id": sid, "op": op}, [(op, sid)])
            return
        question = _CONFIRM[op].format(sid=sid)
        confirm(yes, question[0].upper() + question[1:], question.rstrip("?"))
        _handle_op(config, name, op, output)

    return confirmed if op in _CONFIRM else command


for _op, (_help, _) in _SCHEDULE_OPS.items():
    app.command(_op, help=_help)(_op_command(_op))
