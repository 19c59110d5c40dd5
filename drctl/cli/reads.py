"""The CLI's reads of infrastructure, asked of the workers (drctl.client.reads, workflows/reads.py).

Commands call `ask` and get the parts back; `value_of` turns one part into its model or into the
one-line error the user sees: NotFound and Invalid are exit 2 (fix the name), a queue without a
worker is exit 3 (nothing could be read), anything else exit 1.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from drctl.cli.common import UserError, run_async

# The models load when a read is made, not for -h or Tab completion of the commands that import this.
if TYPE_CHECKING:
    from pydantic import BaseModel
    from temporalio.client import Client

    from drctl.config.schema import FleetConfig
    from drctl.models.reads import ReadPart, ReadResult, ReadWhat

M = TypeVar("M", bound="BaseModel")

EXIT_FAILED, EXIT_USAGE, EXIT_NOT_STARTED = 1, 2, 3


async def _answered(cfg: FleetConfig, request: Callable[[Client], Awaitable[ReadResult]]) -> ReadResult:
    from drctl.client.connection import connect
    from drctl.client.reads import NoWorkerError, ReadTimeout

    client = await connect(cfg)
    try:
        return await request(client)
    except NoWorkerError as exc:
        raise UserError(str(exc), EXIT_NOT_STARTED) from None
    except ReadTimeout as exc:
        raise UserError(str(exc), EXIT_FAILED) from None


async def ask_async(cfg: FleetConfig, what: ReadWhat, **more: Any) -> ReadResult:
    from drctl.client.reads import read_fleet

    return await _answered(cfg, lambda client: read_fleet(client, cfg, what, **more))


def ask(cfg: FleetConfig, what: ReadWhat, **more: Any) -> ReadResult:
    """One FleetRead; `more` fills its ReadInput (regions, name, limit, failover, timeout_s)."""
    return run_async(lambda: ask_async(cfg, what, **more))


def change_schedules(
    cfg: FleetConfig, action: Literal["create", "delete"], name: str, regions: list[str], **more: Any
) -> ReadResult:
    """One BackupScheduleChange: `name` created or deleted in `regions` by their workers."""
    from drctl.client.reads import change_schedules as change

    return run_async(
        lambda: _answered(cfg, lambda client: change(client, cfg, action, name, regions, **more))
    )


def part_error(part: ReadPart, missing: str | None = None) -> UserError:
    from drctl.models.reads import NO_WORKER

    if part.kind == NO_WORKER:
        return UserError(part.error or "", EXIT_NOT_STARTED)
    if part.kind == "NotFound" and missing:
        return UserError(missing, EXIT_USAGE)
    usage = part.kind in ("NotFound", "Invalid", "Conflict")  # fix the name: it is not there, or taken
    return UserError(part.error or "", EXIT_USAGE if usage else EXIT_FAILED)


def value_of(res: ReadResult, key: str, model: type[M], missing: str | None = None) -> M:
    """Part `key` as `model`; its error (with `missing` as the NotFound message) as a UserError."""
    part = res.parts.get(key)
    if part is None:
        raise UserError(f"the workers' answer has no {key!r}", EXIT_FAILED)
    if not part.ok:
        raise part_error(part, missing)
    return model.model_validate(part.value)
