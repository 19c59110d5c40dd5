"""`drctl worker`: run the Temporal worker(s) of this fleet until SIGTERM/SIGINT."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from drctl.cli.common import DEFAULT_CONFIG, ConfigOpt, UserError, err_console, load, run_async


def register(app: typer.Typer) -> None:
    @app.command("worker")
    def worker(
        config: ConfigOpt = Path(DEFAULT_CONFIG),
        region: Annotated[
            list[str] | None,
            typer.Option("--region", "-r", help="Serve this region's task queue (repeatable); default: every region."),
        ] = None,
        no_main: Annotated[
            bool, typer.Option("--no-main", help="Serve only region queues, not workflows (a region-local worker).")
        ] = False,
        http_port: Annotated[
            int | None,
            typer.Option("--http-port", min=0, max=65535,
                         help="Port of /metrics, /healthz and /readyz (default: worker.http_port; 0 disables)."),
        ] = None,
        http_host: Annotated[
            str | None,
            typer.Option("--http-host", help="Address the HTTP endpoint binds to (default: worker.http_host)."),
        ] = None,
    ) -> None:
        """Run drctl's workflows and activities: the main queue plus each served region's queue."""
        from drctl.worker import run_worker
        from drctl.worker_http import EndpointError

        cfg = load(config)
        if http_host is not None:
            cfg = cfg.model_copy(update={"worker": cfg.worker.model_copy(update={"http_host": http_host})})
        for r in region or []:
            cfg.region(r)  # unknown region: exit 2 listing the known ones
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        queues = ([cfg.temporal.task_queue] if not no_main else []) + [
            cfg.region(r).queue for r in (region or cfg.region_names)
        ]
        err_console.print(f"drctl worker for fleet {cfg.name!r} on {cfg.temporal.address}: queues {', '.join(queues)}")
        try:
            run_async(lambda: run_worker(cfg, region or None, main=not no_main, http_port=http_port))
        except EndpointError as exc:
            raise UserError(str(exc)) from None
        err_console.print("worker stopped")
