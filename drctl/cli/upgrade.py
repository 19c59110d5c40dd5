"""`drctl upgrade` (canary / blue-green behind a backup), `drctl upgrade promote|abort|pause|resume|status`,
and `drctl migrate`."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from drctl.cli import common
from drctl.cli.operation import RunOptions, run_options

# The models and the Temporal client load when a command runs, not for -h or Tab completion.
if TYPE_CHECKING:
    from drctl.config.schema import FleetConfig
    from drctl.models.migration import MigrationRequest, MigrationResult
    from drctl.models.upgrade import UpgradeRequest, UpgradeResult


class StrategyChoice(StrEnum):
    """--strategy's choices: drctl.models.upgrade.Strategy's values (tests/units/test_cli_options.py)."""

    CANARY = "canary"
    BLUE_GREEN = "blue-green"


def ui_link(cfg: FleetConfig, wid: str) -> str:
    from drctl.client.connection import ui_link as link

    return link(cfg, wid)


app = typer.Typer(
    name="upgrade",
    help="Upgrade the fleet behind a Velero backup: canary or blue-green, region by region.",
    invoke_without_command=True,
    no_args_is_help=False,
)

# A container image reference with an explicit tag or digest: an upgrade must name what it ships.
_IMAGE = re.compile(
    r"^(?:[a-z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127}|@sha256:[a-f0-9]{64})$"
)


def new_id() -> str:
    return f"{datetime.now(UTC):%Y%m%d%H%M%S}-{uuid.uuid4().hex[:4]}"


def parse_image(image: str) -> str:
    if not _IMAGE.fullmatch(image):  # fullmatch: `$` alone would let a trailing newline through
        raise common.UserError(
            f"bad image reference {image!r}: expected e.g. vllm/vllm-openai:v0.6.4 "
            "(a tag or @sha256 digest is required)"
        )
    return image


def parse_steps(text: str) -> list[int]:
    try:
        steps = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise common.UserError(
            f"bad --steps {text!r}: expected comma-separated percentages, e.g. 5,25,50,100"
        ) from None
    if not steps or any(s <= 0 or s > 100 for s in steps) or steps != sorted(set(steps)) or steps[-1] != 100:
        raise common.UserError(
            f"bad --steps {text!r}: percentages must be increasing, within 1..100, and end at 100"
        )
    return steps


def parse_env(pairs: list[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise common.UserError(f"bad --env {p!r}: expected NAME=VALUE")
        env[key] = value
    return env


def render(res: UpgradeResult | MigrationResult, link: str, out: Console = common.console) -> None:
    """The result table: outcome, reason, backup, each wave, and what every region now runs."""
    from drctl.cli.gitops import gitops_rows
    from drctl.models.migration import MigrationResult

    t = Table(title=f"{type(res).__name__.removesuffix('Result').lower()}: {res.outcome.value}")
    t.add_column("", overflow="fold")
    t.add_column("", overflow="fold")
    t.add_row("reason", res.reason)
    if res.failed_metric:
        t.add_row("failed metric", res.failed_metric)
    if res.backup:
        t.add_row("backup", f"{res.backup.name} ({res.backup.phase}, {res.backup.items} items)")
    for w in getattr(res, "waves", []):
        last = w.analyses[-1].reason if w.analyses else "-"
        t.add_row(
            f"wave {w.region}", f"{w.outcome.value if w.outcome else '…'} at {w.step_percent} %: {last}"
        )
    for r in getattr(res, "releases", []):
        t.add_row(f"release {r.region}", f"{r.image} ({r.state})")
        for line in getattr(r, "left_behind", []):
            t.add_row(f"left behind {r.region}", line)
    if isinstance(res, MigrationResult):
        if res.failed_step:
            t.add_row("failed at", res.failed_step)
        for step in res.rollback:
            t.add_row("rollback", step)
        t.add_row("global weights", str(res.weights))
    for row in gitops_rows(res.gitops_managed):
        t.add_row(*row)
    out.print(t)
    out.print(f"UI: {link}", markup=False, highlight=False)


def plan_rows(req: UpgradeRequest | MigrationRequest) -> list[tuple[str, str]]:
    """The gist of an upgrade's or a migration's input, for a --dry-run table."""
    from drctl.models.migration import MigrationRequest

    a = req.limits
    common_rows = [
        ("backup first", ", ".join(f"{r} {ns}" for r, ns in getattr(req, "namespaces", {}).items())),
        (
            "traffic steps",
            " → ".join(f"{p} %" for p in req.steps_percent) + f", {req.step_pause_s:g} s apart",
        ),
        ("analysis limits", ", ".join(f"{k} {v}" for k, v in a.model_dump(exclude_none=True).items())),
    ]
    if isinstance(req, MigrationRequest):
        return [
            ("source", f"{req.source} (namespace {req.namespace}, backed up first)"),
            ("target", f"{req.target} (namespace {req.target_namespace}, restored there)"),
            *common_rows[1:],
            ("decommission", "scale the source to zero at the end" if req.decommission_source else "no"),
        ]
    return [
        ("image", req.release.image),
        ("strategy", str(req.strategy)),
        ("waves", " → ".join(req.regions)),
        *common_rows,
        ("approval", "between regions" if req.approval_between_regions else "none"),
    ]


def _workflow_id(cfg: FleetConfig, kind: str, ident: str) -> str:
    return ident if ident.startswith(f"{kind}/") else f"{kind}/{cfg.name}/{ident}"


@app.callback()
@run_options()
def upgrade(
    ctx: typer.Context,
    image: Annotated[str | None, typer.Option("--image", help="New image, with a tag or digest.")] = None,
    strategy: Annotated[
        StrategyChoice, typer.Option("--strategy", help="canary or blue-green.")
    ] = StrategyChoice.CANARY,
    steps: Annotated[
        str | None, typer.Option("--steps", help="Canary weights, e.g. 5,25,50,100 (default from config).")
    ] = None,
    regions: Annotated[
        str | None, typer.Option("--regions", help="Comma-separated waves, in order (default: all).")
    ] = None,
    env: Annotated[
        list[str], typer.Option("--env", help="NAME=VALUE set on the serving container (repeatable).")
    ] = [],  # noqa: B006
    config: common.ConfigOpt = common.CONFIG,
    *,
    run: RunOptions,
) -> None:
    """Start an upgrade (`drctl upgrade --image IMG`), or manage one (subcommands)."""
    if ctx.invoked_subcommand:
        return
    from drctl.models.upgrade import Strategy, UpgradeResult, upgrade_request

    if not image:
        raise common.UserError("--image is required, e.g. drctl upgrade --image vllm/vllm-openai:v0.6.4")
    cfg = common.load(config)
    parse_image(image)
    step_list = parse_steps(steps) if steps is not None else None  # --steps "" is a mistake, not the default
    waves = [r.strip() for r in regions.split(",") if r.strip()] if regions else None
    for r in waves or []:
        cfg.region(r)  # unknown region: exit 2 listing the known ones
    if waves is not None and len(set(waves)) != len(waves):
        raise common.UserError(f"--regions names a region twice: {regions}")
    req = upgrade_request(cfg, new_id(), image, Strategy(strategy.value), waves, step_list, parse_env(env))
    wid = f"upgrade/{cfg.name}/{req.upgrade_id}"
    if run.dry_run:
        common.print_plan(run.output, f"upgrade to {image}", wid, req, plan_rows(req))
        return
    common.confirm(
        run.yes,
        f"Upgrade fleet {cfg.name!r} to {image} ({req.strategy}, regions {', '.join(req.regions)})?",
        "upgrade the fleet",
    )
    from workflows.upgrade import Upgrade

    run.operate(
        cfg,
        "upgrade",
        Upgrade.run,
        req,
        UpgradeResult,
        render,
        operation="upgrade",
        workflow_id=wid,
        target=",".join(req.regions),
    )


# The control updates that change the fleet: promote moves all traffic to the new release, abort
# rolls it back. Pause and resume only hold or release the next step, and are not asked.
CONFIRMED = {
    "promote": (
        "Promote {wid} now: all traffic to the new release, skipping the remaining analysis?",
        "promote",
    ),
    "abort": ("Abort {wid} and roll it back to the stable release?", "abort"),
}


def _send(
    config: Path | None, upgrade_id: str, name: str, reason: str, output: common.Output, yes: bool
) -> None:
    """Send one control update (promote, abort, pause, resume) to a running upgrade; print its answer.

    The update records who sent it (drctl.client.identity), as every operation records its initiator.
    """
    from drctl.client.identity import identity

    cfg = common.load(config)
    wid = _workflow_id(cfg, "upgrade", upgrade_id)
    by = identity(cfg)
    if name in CONFIRMED:
        question, verb = CONFIRMED[name]
        common.confirm(yes, question.format(wid=wid), f"{verb} {wid}")

    async def go() -> Any:
        from temporalio.client import WorkflowUpdateFailedError

        from drctl.client.connection import connect

        handle = (await connect(cfg)).get_workflow_handle(wid)
        try:
            return await handle.execute_update(name, {"reason": reason, "by": by})
        except WorkflowUpdateFailedError as exc:
            raise common.UserError(f"{name} refused: {exc.cause}", exit_code=1) from None
        except Exception as exc:  # noqa: BLE001 - RPC errors: unknown id, finished workflow
            raise common.UserError(f"cannot {name} {wid}: {exc}", exit_code=1) from None

    ack = common.run_async(go)
    if common.printed_json(output, {"workflow_id": wid, "update": name, "ack": common.plain(ack)}):
        return
    common.console.print(
        getattr(ack, "message", None) or (ack.get("message") if isinstance(ack, dict) else ack)
    )
    common.console.print(f"UI: {ui_link(cfg, wid)}")


UpgradeId = Annotated[str, typer.Argument(help="Upgrade id (or full workflow id upgrade/<fleet>/<id>).")]
Reason = Annotated[str, typer.Option("--reason", help="Why, for the audit trail.")]


def _control_command(name: str) -> Any:
    def command(
        upgrade_id: UpgradeId,
        reason: Reason = f"{name} from the CLI",
        config: common.ConfigOpt = common.CONFIG,
        output: common.OutputOpt = common.TABLE,
        yes: common.YesOpt = False,
    ) -> None:
        _send(config, upgrade_id, name, reason, output, yes)

    command.__doc__ = f"{name.capitalize()} a running upgrade."
    return command


# The four control updates take the same arguments; only the update's name differs.
for _name in ("promote", "abort", "pause", "resume"):
    app.command(_name)(_control_command(_name))


@app.command("status")
def status(
    upgrade_id: Annotated[str, typer.Argument(help="Upgrade id (or full workflow id).")],
    config: common.ConfigOpt = common.CONFIG,
    output: common.OutputOpt = common.TABLE,
) -> None:
    """Phase, region, step, pause state and last analysis of an upgrade."""
    cfg = common.load(config)
    wid = _workflow_id(cfg, "upgrade", upgrade_id)

    from drctl.models.upgrade import UpgradeStatus

    async def go() -> UpgradeStatus:
        from drctl.client.connection import connect

        handle = (await connect(cfg)).get_workflow_handle(wid)
        try:
            return await handle.query("status", result_type=UpgradeStatus)
        except Exception as exc:  # noqa: BLE001
            raise common.UserError(f"cannot read {wid}: {exc}", exit_code=1) from None

    st = common.run_async(go)
    if common.printed_json(output, st):
        return
    common.console.print(
        f"{wid}: phase [bold]{st.phase}[/] region {st.region or '-'} step {st.step_percent} %"
        + (f" [yellow]PAUSED[/] ({st.pause_reason})" if st.paused else "")
    )
    for w in st.waves:
        last = w.analyses[-1] if w.analyses else None
        common.console.print(
            f"  {w.region}: {w.outcome.value if w.outcome else 'in progress'}"
            + (f" — {last.verdict.value}: {last.reason}" if last else "")
        )
    common.console.print(f"UI: {ui_link(cfg, wid)}")
