"""`drctl failover --break-glass` (traffic moved without Temporal) and `drctl failover-import`.

The one CLI module that runs infrastructure itself, through `drctl.worker.breakglass`: a break-glass
failover exists for when the workers' Temporal is gone. It refuses while Temporal answers (unless
--force), leaves an audit record in the fleet's audit bucket and on stdout, and prints the command
that imports the record once Temporal is back (docs/failover.md, "Break-glass failover").
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from drctl.cli import common

if TYPE_CHECKING:
    from drctl.config.schema import FleetConfig
    from drctl.models.breakglass import BreakGlassRecord, ImportResult

app = typer.Typer()

_LOUD = "!" * 72
# The import completes in one workflow task; a worker that is up answers within seconds.
IMPORT_WAIT_S = 60.0


def _fmt(weights: dict[str, int]) -> str:
    return " / ".join(f"{r} {w}" for r, w in weights.items()) or "?"


def import_command(uri: str, config: Path | None) -> str:
    where = f" -c {shlex.quote(str(config))}" if config else ""
    return f"drctl failover-import {shlex.quote(uri)}{where}"


def break_glass(
    cfg: FleetConfig,
    config: Path | None,
    to: str,
    from_: str | None,
    *,
    emergency: bool,
    force: bool,
    yes: bool,
    dry_run: bool,
) -> None:
    """Preflight, confirm, shift, record: the Failover's steps in this process, without Temporal."""
    from drctl.client.identity import identity
    from drctl.worker import breakglass as bg

    say = common.console.print
    why = bg.temporal_unreachable(cfg)
    if why is None and not force:
        raise common.UserError(
            f"Temporal at {cfg.temporal.address} answered: run `drctl failover --to {to}` (the Failover "
            "workflow: durable, locked, verified). --break-glass is for when Temporal is unreachable; "
            "--force overrides this check. Nothing changed."
        )
    evidence = why or f"Temporal answered at {cfg.temporal.address}; break-glass forced (--force)"
    rec = bg.new_record(cfg, identity(cfg), to, force, evidence)
    say(f"[bold red]BREAK GLASS[/]: failover of fleet {cfg.name!r} to {to} without Temporal", markup=True)
    say(f"  Temporal: {evidence}", markup=False, highlight=False)
    try:
        bg.preflight(cfg, rec, from_, emergency)
    except Exception as exc:  # a provider's error: nothing has been changed yet
        raise common.UserError(f"break-glass preflight failed, nothing changed: {exc}", 1) from None
    plan = rec.plan
    assert plan is not None and rec.probe is not None
    say(f"  target probe: {rec.probe.status.value}: {rec.probe.reason}", markup=False, highlight=False)
    say(f"  global weights: {_fmt(plan.weights_before)} → {_fmt(plan.weights_after)}", markup=False)
    say(
        f"  {to} replicas: {plan.target_replicas_before} of {plan.target_replicas_needed} needed "
        f"({plan.sizing})"
        + (
            f"; scaled to {plan.target_replicas_planned} before the shift, not waited for"
            if plan.target_replicas_planned > plan.target_replicas_before
            else ""
        ),
        markup=False,
        highlight=False,
    )
    if rec.status == "refused":
        raise common.UserError(f"break-glass failover refused, nothing changed: {rec.error}", 1)
    if dry_run:
        say("dry run: nothing changed")
        return
    common.confirm(
        yes,
        f"BREAK GLASS: move all traffic of fleet {cfg.name!r} to {to} without Temporal?",
        "change traffic",
    )
    bg.scale(cfg, rec)
    if rec.scale_error:
        say(f"  scale-up failed, shifting anyway: {rec.scale_error}", markup=False, highlight=False)
    elif rec.scaled_to is not None:
        say(f"  {to} scaled to {rec.scaled_to} replicas; not waited for", markup=False)
    try:
        bg.shift(cfg, rec)
    except Exception as exc:  # the tier may have taken part of it: recorded as failed, with what is read
        rec.error = f"shift failed: {exc}"
        try:
            rec.weights_after = bg.read_weights(cfg)
        except Exception as again:
            rec.error += f"; weights after could not be read: {again}"
    if rec.status == "succeeded":
        try:
            bg.verify(cfg, rec)
        except Exception as exc:  # e.g. the auth config unreadable: the move stands, unverified
            rec.status, rec.error = "unverified", f"verification could not run: {exc}"
        v = rec.verify
        if v is not None:
            say(
                f"  verified: {v.ok}/{v.total} ok through the global endpoint, by region {v.by_region}",
                markup=False,
            )
    from datetime import UTC, datetime

    rec.finished_at = datetime.now(UTC)
    _record(cfg, config, rec)
    if rec.status == "unverified":
        raise common.UserError(f"break-glass failover moved traffic but is unverified: {rec.error}", 1)
    if rec.status != "succeeded":
        raise common.UserError(f"break-glass failover failed: {rec.error}", 1)


def _record(cfg: FleetConfig, config: Path | None, rec: BreakGlassRecord) -> None:
    """The record to the audit bucket and to stdout, then the import command. A failed write undoes
    nothing (traffic stays where it was moved) and says so loudly."""
    from drctl.worker import breakglass as bg

    try:
        uri: str | None = bg.store(cfg, rec)
    except Exception as exc:
        uri, stored_error = None, str(exc)
    common.console.print(
        f"weights now: {_fmt(rec.weights_after)} ({rec.change_status or 'unknown'})", markup=False
    )
    print("--- break-glass audit record ---")
    # ASCII only: a probe's reason quoted from a replica cannot repaint the operator's terminal.
    print(json.dumps(rec.model_dump(mode="json"), indent=2, ensure_ascii=True))
    print("--- end of record ---")
    if uri is not None:
        print(f"audit record stored: {uri}")
        print(f"once Temporal is back, run: {import_command(uri, config)}")
        return
    saved = f"breakglass-{rec.id.replace('/', '-')}.json"
    print(_LOUD)
    print(f"THE AUDIT RECORD WAS NOT STORED in s3://{bg.audit_bucket(cfg)}: {stored_error}")
    print("Traffic was NOT moved back. Save the record above (between the markers) as a file, e.g.")
    print(f"  {saved}, and once Temporal is back run: {import_command(saved, config)}")
    print(_LOUD)


@app.command("failover-import")
def failover_import(
    record: Annotated[
        str, typer.Argument(help="The audit record: s3://<bucket>/<key>, or a file holding its JSON.")
    ],
    config: common.ConfigOpt = common.CONFIG,
    timeout: common.Timeout = None,
    output: common.OutputOpt = common.TABLE,
) -> None:
    """Import a break-glass failover's audit record as a completed operation (ImportedOperation)."""
    from drctl.client.identity import identity
    from drctl.worker import breakglass as bg

    cfg = common.load(config)
    try:
        rec = bg.load(cfg, record)
    except ValueError as exc:
        raise common.UserError(str(exc)) from None
    except Exception as exc:  # S3 refused or failed: nothing imported
        raise common.UserError(f"{record}: could not read the record: {exc}", 1) from None
    wait_s = IMPORT_WAIT_S if timeout is None else timeout
    res, link, again = common.run_async(lambda: _import(cfg, rec, record, identity(cfg), wait_s))
    if common.printed_json(output, {"result": res.model_dump(mode="json"), "ui_link": link, "again": again}):
        return
    if again:
        common.console.print(f"already imported as {rec.workflow_id}", markup=False)
    common.console.print(
        f"imported: break-glass failover {rec.source or '?'} → {rec.target} by {rec.who} "
        f"({rec.status}) as {rec.workflow_id}; monitor told: {'yes' if res.monitor_told else 'no'}",
        markup=False,
        highlight=False,
    )
    if res.note:
        common.console.print(res.note, markup=False, highlight=False)
    common.console.print(f"UI: {link}", markup=False)


async def _import(
    cfg: FleetConfig, rec: BreakGlassRecord, uri: str, who: str, wait_s: float
) -> tuple[ImportResult, str, bool]:
    """Start ImportedOperation once per record (a second import finds the first) and wait for it."""
    import asyncio

    from drctl.client.connection import connect, ui_link
    from drctl.client.imports import start_import

    handle, again = await start_import(await connect(cfg), cfg, rec, uri, who)
    try:
        res = await asyncio.wait_for(handle.result(), wait_s)
    except TimeoutError:
        raise common.UserError(
            f"{rec.workflow_id} started but no worker ran it within {wait_s:g} s (are the workers "
            f"up on {cfg.temporal.task_queue}?); it completes when one does: {ui_link(cfg, rec.workflow_id)}",
            4,
        ) from None
    return res, ui_link(cfg, rec.workflow_id), again
