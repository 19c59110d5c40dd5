"""drctl command line. Thin: parse, start/signal/query a workflow, render."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from drctl.cli.entry import package_version

# Every command, the module that defines it, and its one-line help: `drctl --help`, `--version` and
# shell completion read this table and import no command module, so they stay fast (the Temporal,
# Kubernetes and AWS clients cost seconds to import). tests/units/test_cli_table.py keeps it equal to
# what the modules define.
COMMANDS: dict[str, tuple[str, str]] = {
    "config": ("config_cmd", "Fleet configuration."),
    "dev": ("dev", "The embedded dev stack: everything on one machine, no cloud account."),
    "worker": (
        "worker",
        "Run drctl's workflows and activities: the main queue plus each served region's queue.",
    ),
    "eks-token": (
        "worker",
        "Print an EKS ExecCredential (a kubeconfig exec plugin, like `aws eks get-token`).",
    ),
    "status": (
        "status",
        "The fleet now: region states, probe figures, global weights, replicas, running operations.",
    ),
    "failover": ("failover", "Move the fleet's traffic to one region, through the Failover workflow."),
    "failback": (
        "failover",
        "Return traffic to the configured weights in steps, checking health at each step.",
    ),
    "failover-import": (
        "breakglass",
        "Import a break-glass failover's audit record as a completed operation (ImportedOperation).",
    ),
    "monitor": ("monitor", "The fleet's health monitor workflow (monitor/<fleet>)."),
    "ops": ("ops", "Running and recent operations (failover, failback, upgrade, migrate, drill)."),
    "upgrade": (
        "upgrade",
        "Upgrade the fleet behind a Velero backup: canary or blue-green, region by region.",
    ),
    "migrate": (
        "migrate",
        "Move the workload from one region's cluster to another's, and its traffic after it.",
    ),
    "restore": ("backup", "Restore a backup into one region's cluster and wait for Velero to finish."),
    "backup": ("backup", "Velero backups of the inference workload."),
    "drill": ("drill", "Chaos drills that measure the real RTO."),
    "replicate": ("replicate", "Model artifact and state replication with rclone (replicate/<fleet>)."),
    "notify": ("notify", "Webhook notifications (notifications.webhooks in the config)."),
    "codec-server": ("codec", "Decrypt and encrypt payloads for the Temporal UI's remote codec setting."),
}

HELP = "Disaster recovery and migration for multi-region LLM inference fleets, on Temporal."
EPILOG = (
    "Which fleet: -c FILE or --fleet NAME, else DRCTL_CONFIG or DRCTL_FLEET, else the current context "
    "(drctl config use-context), else ~/.config/drctl/fleet.yaml. "
    "Exit codes, the same for every command: 0 succeeded; 1 ran and did not succeed (the result says "
    "why); 2 usage or validation error, or a confirmation refused without a terminal (pass --yes); 3 "
    "nothing started: the fleet is busy, or Temporal is unreachable; 4 still running: --timeout passed, "
    "the operation goes on."
)


def module_command(name: str) -> Any:
    """The command `name`, built from the one module that defines it (imported now)."""
    module = importlib.import_module(f"drctl.cli.{COMMANDS[name][0]}")
    # A module holds one Typer app: a named group (`ops`, `drill`, ...) or top-level commands. Added
    # to a group of its own, it is built exactly as an eager top level would build it.
    holder = typer.Typer(rich_markup_mode=None, context_settings=HELP_OPTIONS)
    holder.add_typer(module.app)
    return typer.main.get_group(holder).commands[name]


class _Listed(TyperCommand):
    """A command as the table lists it, for help screens: its name and one line, nothing imported."""

    def __init__(self, name: str) -> None:
        super().__init__(name, help=COMMANDS[name][1])


class LazyGroup(TyperGroup):
    """The top level: a command's module is imported only when that command runs (or completes).

    `commands`, read whole (the README tests walk the tree), builds every command.
    """

    _listing = False
    _built: dict[str, Any]

    @property  # type: ignore[override]
    def commands(self) -> dict[str, Any]:
        for name in COMMANDS.keys() - self._built.keys():
            self._built[name] = module_command(name)
        return self._built

    @commands.setter
    def commands(self, value: dict[str, Any]) -> None:
        self._built = dict(value)

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        if self._listing:
            return _Listed(cmd_name)
        if cmd_name not in self._built:
            self._built[cmd_name] = module_command(cmd_name)
        return self._built[cmd_name]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


# `-h` is help on every command, as `--help` is (click offers only --help unless told).
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="drctl",
    cls=LazyGroup,
    context_settings=HELP_OPTIONS,
    # Plain help, as the Temporal CLI's: rich's help formatter costs a quarter of a second to import,
    # more than everything else `drctl CMD -h` needs (bench/cli_latency.py).
    rich_markup_mode=None,
    help=HELP,
    epilog=EPILOG,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        print(f"drctl {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    version_: Annotated[
        bool | None,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print drctl's version and exit."
        ),
    ] = None,
    fleet: Annotated[
        str | None,
        typer.Option(
            "--fleet",
            help="The fleet by context name (drctl config get-contexts); overrides DRCTL_CONFIG, "
            "DRCTL_FLEET and the current context. Same as DRCTL_FLEET=NAME.",
        ),
    ] = None,
) -> None:
    """Disaster recovery and migration for multi-region LLM inference fleets, on Temporal."""
    from drctl.cli import selection

    selection.fleet_flag = fleet


def document_output(args: list[str]) -> str | None:
    """ "json" or "yaml" when the command line asks for a document (-o/--output), else None."""
    found = None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg in ("-o", "--output") and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith("--output="):
            found = arg.removeprefix("--output=")
        elif arg.startswith("-o") and len(arg) > 2 and not arg.startswith("--"):
            found = arg[2:]
    return found if found in ("json", "yaml") else None


def invoke(args: list[str] | None = None) -> int:
    """Run one command line and return its exit code; every error is rendered here, never raised.

    With -o json|yaml a failure is also one error object on stdout (errors.render_error).
    """
    document = document_output(sys.argv[1:] if args is None else args)
    try:
        # Without standalone mode click returns typer.Exit's code instead of raising it.
        returned = app(args=args, prog_name="drctl", standalone_mode=False)
        return returned if isinstance(returned, int) else 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - the one place errors are rendered
        from drctl.cli.errors import render_error  # imports the Temporal client: only on an error

        return render_error(exc, document)


def run() -> None:
    code = invoke()
    sys.stdout.flush()
    sys.stderr.flush()
    # The Temporal SDK's runtime can abort at interpreter exit (sdk-python#300); the work is done
    # and flushed, so leave without running interpreter teardown.
    os._exit(code)


if __name__ == "__main__":
    run()
