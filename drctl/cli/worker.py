"""`drctl worker`: run the Temporal worker(s) of this fleet until SIGTERM/SIGINT."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer

from drctl.cli.common import UserError, config_path, load, run_async


class LogFormatOpt(str, enum.Enum):
    text = "text"
    json = "json"


app = typer.Typer()


@app.command("worker")
def worker(
    config: Annotated[
        list[Path] | None,
        typer.Option(
            "--config",
            "-c",
            envvar="DRCTL_CONFIG",
            help="Fleet config file (repeatable: one worker serves every fleet named; default as every command "
            "finds it: --fleet, DRCTL_FLEET, the current context, ~/.config/drctl/fleet.yaml; "
            "DRCTL_CONFIG may list several, separated by ':').",
        ),
    ] = None,
    config_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--config-dir", help="Serve every fleet config (*.yaml, *.yml) in this directory (repeatable)."
        ),
    ] = None,
    region: Annotated[
        list[str] | None,
        typer.Option(
            "--region", "-r", help="Serve this region's task queue (repeatable); default: every region."
        ),
    ] = None,
    no_main: Annotated[
        bool,
        typer.Option("--no-main", help="Serve only region queues, not workflows (a region-local worker)."),
    ] = False,
    http_port: Annotated[
        int | None,
        typer.Option(
            "--http-port",
            min=0,
            max=65535,
            help="Port of /metrics, /healthz and /readyz (default: worker.http_port; 0 disables).",
        ),
    ] = None,
    http_host: Annotated[
        str | None,
        typer.Option("--http-host", help="Address the HTTP endpoint binds to (default: worker.http_host)."),
    ] = None,
    log_format: Annotated[
        LogFormatOpt,
        typer.Option(
            "--log-format",
            envvar="DRCTL_LOG_FORMAT",
            help="text, or json: one object per line with fleet, region, operation, workflow_id.",
        ),
    ] = LogFormatOpt.text,
) -> None:
    """Run drctl's workflows and activities: the main queue plus each served region's queue.

    With several fleets (--config repeated, or --config-dir), one process serves them all: one
    Temporal client, thread pool and HTTP endpoint (the first fleet's worker settings); each fleet
    keeps its own task queues.
    """
    from drctl.worker import logs
    from drctl.worker.endpoint import EndpointError
    from drctl.worker.fleets import FleetsError, check_fleets, config_files
    from drctl.worker.process import run_worker

    try:
        files = config_files(config or ([] if config_dir else [config_path(None)]), config_dir or [])
    except FleetsError as exc:
        raise UserError(str(exc)) from None
    cfgs = [load(f) for f in files]
    if http_host is not None:
        cfgs[0] = cfgs[0].model_copy(
            update={"worker": cfgs[0].worker.model_copy(update={"http_host": http_host})}
        )
    if len(cfgs) == 1:
        for r in region or []:
            cfgs[0].region(r)  # unknown region: exit 2 listing the known ones
    try:
        check_fleets(cfgs, region or None, main=not no_main)
    except FleetsError as exc:
        raise UserError(str(exc)) from None
    logs.setup(log_format.value, cfgs, region or None)
    try:
        run_async(lambda: run_worker(cfgs, region or None, main=not no_main, http_port=http_port))
    except EndpointError as exc:
        raise UserError(str(exc)) from None


@app.command("eks-token")
def eks_token(
    cluster_name: Annotated[str, typer.Option("--cluster-name", help="EKS cluster name.")],
    aws_region: Annotated[str, typer.Option("--region", help="AWS region of the cluster.")],
) -> None:
    """Print an EKS ExecCredential (a kubeconfig exec plugin, like `aws eks get-token`)."""
    import json

    import botocore.exceptions

    from drctl.cli.common import UserError
    from drctl.providers.eks_token import exec_credential

    try:
        cred = exec_credential(cluster_name, aws_region)
    except botocore.exceptions.NoCredentialsError as exc:
        raise UserError(
            f"no AWS credentials for the EKS token of {cluster_name}: {exc}", exit_code=1
        ) from None
    typer.echo(json.dumps(cred))
