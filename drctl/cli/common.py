"""Shared CLI plumbing: config loading, the user-error type, async running, output modes."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console

from drctl.config.schema import FleetConfig, load_config

T = TypeVar("T")

console = Console()
err_console = Console(stderr=True)

DEFAULT_CONFIG = "config/fleet.yaml"

ConfigOpt = Annotated[
    Path, typer.Option("--config", "-c", help="Fleet config file.", envvar="DRCTL_CONFIG", show_default=True)
]


class Output(str, Enum):
    table = "table"
    json = "json"


OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="Output format.")]

# The defaults every command gives its --config and --output, stated once.
CONFIG = Path(DEFAULT_CONFIG)
TABLE = Output.table


class UserError(Exception):
    """A mistake the user can fix. Rendered without a traceback; exit code 2 unless given."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def fail(message: str, exit_code: int = 2) -> NoReturn:
    raise UserError(message, exit_code)


def load(path: Path) -> FleetConfig:
    return load_config(path)


def run_async(fn: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(fn())  # type: ignore[arg-type]


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _plain(value: Any) -> Any:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else value


def printed_json(output: Output, data: Any) -> bool:
    """With --output json, print `data` (plain data, a model or a list of models) and return True."""
    if output is not Output.json:
        return False
    print_json([_plain(v) for v in data] if isinstance(data, list) else _plain(data))
    return True
